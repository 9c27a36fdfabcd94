import CCrypto
import Foundation

/// The device's label as the companion reads it, `RPL1:<serial>:<key>`, and the pairing proofs under its key
/// (HMAC-SHA256, lowercase hex; the Wi-Fi setup's are in SetupClient.swift) computed in process with OpenSSL's
/// libcrypto: the key never leaves this process (an argument of another program, such as
/// `openssl dgst -macopt hexkey:…`, is readable by any local user in /proc while it runs).
struct Label {
    let serial: String
    let keyHex: String

    init(payload: String) throws {
        let parts = payload.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        let hex = Set("0123456789abcdef")
        guard parts.count == 3, parts[0] == "RPL1", !parts[1].isEmpty,
            parts[1].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }), parts[2].count == 32,
            parts[2].allSatisfy({ hex.contains($0) })
        else { throw Failure("--setup must be the label's payload, RPL1:<serial>:<32 lowercase hex digits>") }
        serial = parts[1]
        keyHex = parts[2]
    }

    /// The label typed in by hand: the serial, and the key's nine groups (the last the check group, the first 4
    /// hex digits of SHA-256 of `RPL1 check\n<serial>\n<key>`), in any case, with dashes or spaces or none. A check
    /// group that does not match is a typo, said before any device is asked.
    init(serial: String, typedKey: String) throws {
        let digits = typedKey.lowercased().filter { $0 != "-" && $0 != " " }
        let hex = Set("0123456789abcdef")
        guard !serial.isEmpty, serial.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }), digits.count == 36,
            digits.allSatisfy({ hex.contains($0) })
        else {
            throw Failure(
                "--serial must be the label's serial and --key its setup key: nine groups of four hex digits (the last is the check group)"
            )
        }
        let check = String(
            Self.sha256Hex("RPL1 check\n\(serial)\n\(digits.prefix(32))").prefix(4))
        guard check == String(digits.suffix(4)) else {
            throw Failure("mistyped: the check group does not match; check the serial and the setup key on the label")
        }
        self.serial = serial
        keyHex = String(digits.prefix(32))
    }

    /// The DNS-SD TXT `id` of this label's device: the first 16 hex digits of SHA-256 of the serial.
    var serviceID: String {
        String(Self.sha256Hex(serial).prefix(16))
    }

    /// The `deviceInfo` proof (version 2): over every field the companion acts on, so that a relay between the
    /// laptop and the device cannot change the challenge's method or a phase flag without breaking it.
    func deviceInfoProof(
        nonce: String, sessionId: String, challenge: String, method: String, serial: String, model: String,
        isTestDevice: Bool, shouldIncludeNonLive: Bool
    ) throws -> String {
        try hmac(
            "replenish-pairing-v2 deviceInfo\n\(nonce)\n\(sessionId)\n\(challenge)\n\(method)\n\(serial)\n\(model)\n"
                + "\(isTestDevice)\n\(shouldIncludeNonLive)")
    }

    func companionInfoProof(sessionId: String, code: String, clientId: String, redirectURI: String) throws -> String {
        try hmac("replenish-pairing-v2 companionInfo\n\(sessionId)\n\(code)\n\(clientId)\n\(redirectURI)")
    }

    /// HMAC-SHA256 of `message` under the label's key, as lowercase hex.
    func hmac(_ message: String) throws -> String {
        var key = [UInt8]()
        var index = keyHex.startIndex
        while index < keyHex.endIndex {
            let next = keyHex.index(index, offsetBy: 2)
            guard let byte = UInt8(keyHex[index..<next], radix: 16) else { throw Failure("the label's key is not hex") }
            key.append(byte)
            index = next
        }
        defer { for i in key.indices { key[i] = 0 } }
        let messageBytes = Array(message.utf8)
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let done = HMAC(EVP_sha256(), key, Int32(key.count), messageBytes, messageBytes.count, &out, &length)
        guard done != nil, length == 32 else { throw Failure("libcrypto could not compute HMAC-SHA256") }
        return Self.hex(out.prefix(32))
    }

    /// SHA-256 of `input` as lowercase hex (libcrypto's one-shot `SHA256()`).
    static func sha256Hex(_ input: String) -> String {
        let bytes = Array(input.utf8)
        var out = [UInt8](repeating: 0, count: 32)
        _ = SHA256(bytes, bytes.count, &out)
        return hex(out[...])
    }

    /// `bytes` as lowercase hex.
    static func hex(_ bytes: ArraySlice<UInt8>) -> String {
        bytes.map { String($0 >> 4, radix: 16) + String($0 & 0x0f, radix: 16) }.joined()
    }

    /// `count` random bytes as lowercase hex.
    static func randomHex(_ count: Int) -> String {
        var rng = SystemRandomNumberGenerator()
        return hex((0..<count).map { _ in UInt8.random(in: .min ... .max, using: &rng) }[...])
    }
}
