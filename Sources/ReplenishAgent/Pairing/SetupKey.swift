/// The device's setup key: 16 random bytes made at the factory, printed on the label (`LabelPayload`) and held
/// in the file `pairing.setupKeyFile` (32 lowercase hex digits, a trailing newline allowed). With it the device
/// proves to the companion app that it is the device on the label (the `deviceInfo` proof), and the app proves
/// that it read the label (the `companionInfo` proof): HMAC-SHA256 under the key, lowercase hex, of the texts
/// `deviceInfoMessage` and `companionInfoMessage` build (docs/companion-app.md, "The proofs").
///
/// The key prints as `<redacted>` everywhere; only `hex` (for the key file and the label) gives it out.
struct SetupKey: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let bytes: [UInt8]

    /// The key's size in bytes.
    static let byteCount = 16

    /// A new key from the system's CSPRNG (or `generator` in tests).
    init<R: RandomNumberGenerator>(using generator: inout R) {
        bytes = (0..<Self.byteCount).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// The key written as 32 lowercase hex digits; nil for anything else (upper case included, so the file has
    /// one spelling and a label made from it matches).
    init?(hex text: some StringProtocol) {
        guard let bytes = Self.bytes(lowercaseHex: text), bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    /// A key file's contents: 32 lowercase hex digits, then at most one newline.
    init?(fileContents: [UInt8]) {
        var body = fileContents[...]
        if body.last == UInt8(ascii: "\n") { body = body.dropLast() }
        guard body.count == 2 * Self.byteCount else { return nil }
        self.init(hex: String(decoding: body, as: UTF8.self))
    }

    /// The key as 32 lowercase hex digits: what the key file and the label hold. Never for a log.
    var hex: String { Self.hex(bytes) }

    var description: String { "<redacted>" }
    var debugDescription: String { "<redacted>" }
    var customMirror: Mirror { Mirror(self, children: []) }

    /// The text the `deviceInfo` proof is the MAC of: every field of the answer the phone acts on (version 2;
    /// version 1 left the method and the phase flags out, so a relay could turn the method to `plain`).
    static func deviceInfoMessage(
        nonce: String, sessionId: String, codeChallenge: String, codeChallengeMethod: String, serial: String,
        deviceModel: String, isTestDevice: Bool, shouldIncludeNonLive: Bool
    ) -> String {
        "replenish-pairing-v2 deviceInfo\n\(nonce)\n\(sessionId)\n\(codeChallenge)\n\(codeChallengeMethod)\n\(serial)\n"
            + "\(deviceModel)\n\(isTestDevice)\n\(shouldIncludeNonLive)"
    }

    /// The text the `companionInfo` proof is the MAC of.
    static func companionInfoMessage(sessionId: String, authCode: String, clientId: String, redirectUri: String)
        -> String
    {
        "replenish-pairing-v2 companionInfo\n\(sessionId)\n\(authCode)\n\(clientId)\n\(redirectUri)"
    }

    /// The proof of `message`: HMAC-SHA256 under the key, lowercase hex (64 digits).
    func proof(of message: String) -> String { Self.hex(HMACSHA256.mac(key: bytes, message: Array(message.utf8))) }

    /// Whether `proof` is the proof of `message`, compared in constant time; false for anything that is not
    /// 64 lowercase hex digits.
    func accepts(_ proof: String, of message: String) -> Bool {
        guard let given = Self.bytes(lowercaseHex: proof), given.count == 32 else { return false }
        return HMACSHA256.equalInConstantTime(given, HMACSHA256.mac(key: bytes, message: Array(message.utf8)))
    }

    /// Whether `text` is a `deviceInfo` nonce: 32 hex digits (either case).
    static func isNonce(_ text: String) -> Bool {
        text.utf8.count == 32
            && text.utf8.allSatisfy {
                hexValue($0) != nil || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains($0)
            }
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes of an even number of lowercase hex digits, or nil.
    private static func bytes(lowercaseHex text: some StringProtocol) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
