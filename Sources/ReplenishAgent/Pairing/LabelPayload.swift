/// What the device's label carries for the companion app: the serial and the setup key, as one short text
/// for a QR code, `RPL1:<serial>:<key>` (`RPL1` names this format; a serial is only `A-Z a-z 0-9`, so `:`
/// cannot be part of it; the key is 32 lowercase hex digits), and a form for typing in by hand: the serial,
/// and the key in eight groups of four digits followed by a ninth, the check group, so that a mistyped serial
/// or key is caught before the phone talks to any device (docs/companion-app.md, "The label").
struct LabelPayload: Equatable {
    var serial: String
    var key: SetupKey

    static let prefix = "RPL1"

    /// `RPL1:<serial>:<key>`: the QR code's text.
    var text: String { "\(Self.prefix):\(serial):\(key.hex)" }

    /// The key for typing in by hand: `1a2b-3c4d-…-<check>` (eight groups of four, then the check group).
    var manualEntryKey: String {
        let digits = Array(key.hex)
        let groups = stride(from: 0, to: digits.count, by: 4).map { String(digits[$0..<$0 + 4]) }
        return (groups + [checkGroup]).joined(separator: "-")
    }

    /// The manual form's check group: the first 4 lowercase hex digits of SHA-256 of
    /// `RPL1 check\n<serial>\n<key as 32 lowercase hex digits>` (UTF-8). It covers the serial and the key: a
    /// typo in either is caught with odds of 65,535 in 65,536.
    var checkGroup: String {
        String(SetupKey.hex(SHA256.hash(Array("\(Self.prefix) check\n\(serial)\n\(key.hex)".utf8))).prefix(4))
    }

    init(serial: String, key: SetupKey) {
        self.serial = serial
        self.key = key
    }

    /// A payload's text, or nil when it is not one.
    init?(text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == Self.prefix, AgentConfig.isValidSerial(String(parts[1])),
            let key = SetupKey(hex: parts[2])
        else { return nil }
        self.init(serial: String(parts[1]), key: key)
    }

    /// Why a typed-in label was refused.
    enum ManualEntryError: Error, Equatable {
        /// Not a serial, or not 36 hex digits once dashes and spaces are removed.
        case malformed
        /// Well formed, but the check group does not match the serial and the key: a typo.
        case mistyped
    }

    /// The label as typed in by hand: the serial, and the key's 36 hex digits in any case, with or without
    /// dashes and spaces.
    static func manualEntry(serial: String, key typed: String) -> Result<LabelPayload, ManualEntryError> {
        let digits = typed.lowercased().filter { $0 != "-" && $0 != " " }
        guard AgentConfig.isValidSerial(serial), digits.count == 36, let key = SetupKey(hex: digits.prefix(32)) else {
            return .failure(.malformed)
        }
        let payload = LabelPayload(serial: serial, key: key)
        return payload.checkGroup == String(digits.suffix(4)) ? .success(payload) : .failure(.mistyped)
    }
}
