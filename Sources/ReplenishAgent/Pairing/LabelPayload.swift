/// What the device's label carries for the companion app: the serial and the setup key, as one short text
/// for a QR code, `RPL1:<serial>:<key>` (`RPL1` names this format; a serial is only `A-Z a-z 0-9`, so `:`
/// cannot be part of it; the key is 32 lowercase hex digits), and a form for typing in by hand, the key in
/// eight groups of four digits (docs/companion-app.md, "The label").
struct LabelPayload: Equatable {
    var serial: String
    var key: SetupKey

    static let prefix = "RPL1"

    /// `RPL1:<serial>:<key>`: the QR code's text.
    var text: String { "\(Self.prefix):\(serial):\(key.hex)" }

    /// The key for typing in by hand: `1a2b-3c4d-…` (eight groups of four).
    var manualEntryKey: String {
        let digits = Array(key.hex)
        return stride(from: 0, to: digits.count, by: 4).map { String(digits[$0..<$0 + 4]) }.joined(separator: "-")
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
}
