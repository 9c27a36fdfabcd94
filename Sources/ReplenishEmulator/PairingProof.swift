import Foundation

/// The companion's side of the setup key (the label's `RPL1:<serial>:<key>`): the nonce it sends, the
/// device's `deviceInfo` proof it checks and the `companionInfo` proof it sends, each HMAC-SHA256 under the
/// key's 16 bytes, lowercase hex.
///
/// HMAC comes from the `openssl` command line tool, as the emulator's PKCE hashing does: the emulator links no
/// crypto library and shares no code with the agent, so a misreading of the proofs cannot hide in both. The
/// key reaches `openssl` as an argument (`-macopt hexkey:`): fine for a bench tool on the maker's own machine.
struct PairingProof {
    let serial: String
    let keyHex: String

    /// Why a label payload or a proof was refused.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The label's payload, `RPL1:<serial>:<32 lowercase hex digits>`.
    init(payload: String) throws {
        let parts = payload.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        let hexDigits = Set("0123456789abcdef")
        guard parts.count == 3, parts[0] == "RPL1", !parts[1].isEmpty,
            parts[1].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }), parts[2].count == 32,
            parts[2].allSatisfy({ hexDigits.contains($0) })
        else {
            throw Failure(description: "--setup must be the label's payload, RPL1:<serial>:<32 lowercase hex digits>")
        }
        serial = parts[1]
        keyHex = parts[2]
    }

    /// The key itself, for the emulator's cloud, which knows each unit's key as the factory registered it.
    init(serial: String, keyHex: String) {
        self.serial = serial
        self.keyHex = keyHex
    }

    /// The claim of a unit by a customer (program alexa), over the unit, the customer and the phone's nonce.
    func claimProof(unit: String, customer: String, nonce: String) throws -> String {
        try hmac("replenish-claim-v1\n\(unit)\n\(customer)\n\(nonce)")
    }

    /// 16 random bytes as 32 lowercase hex digits.
    static func makeNonce() -> String {
        var rng = SystemRandomNumberGenerator()
        return (0..<16).map { _ in
            let byte = UInt8.random(in: .min ... .max, using: &rng)
            return String(byte >> 4, radix: 16) + String(byte & 0x0f, radix: 16)
        }.joined()
    }

    /// Version 2: over every field the companion acts on (the method and both phase flags included).
    func deviceInfoProof(
        nonce: String, sessionId: String, codeChallenge: String, codeChallengeMethod: String, serial: String,
        model: String, isTestDevice: Bool, shouldIncludeNonLive: Bool
    ) throws -> String {
        let fields = [
            nonce, sessionId, codeChallenge, codeChallengeMethod, serial, model, "\(isTestDevice)",
            "\(shouldIncludeNonLive)",
        ]
        return try hmac("replenish-pairing-v2 deviceInfo\n" + fields.joined(separator: "\n"))
    }

    func companionInfoProof(sessionId: String, authCode: String, clientId: String, redirectUri: String) throws
        -> String
    {
        try hmac("replenish-pairing-v2 companionInfo\n\(sessionId)\n\(authCode)\n\(clientId)\n\(redirectUri)")
    }

    /// `openssl dgst -sha256 -mac HMAC -macopt hexkey:KEY` of `message` (on standard input).
    private func hmac(_ message: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: OpenSSLTool.path)
        process.arguments = ["dgst", "-sha256", "-mac", "HMAC", "-macopt", "hexkey:\(keyHex)"]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        input.fileHandleForWriting.write(Data(message.utf8))
        try input.fileHandleForWriting.close()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        // `SHA2-256(stdin)= <hex>` (older versions: `HMAC-SHA256(stdin)= <hex>`).
        guard process.terminationStatus == 0, let mac = text.split(separator: " ").last.map(String.init)
        else { throw Failure(description: "openssl could not compute an HMAC") }
        let trimmed = mac.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.count == 64 else { throw Failure(description: "openssl printed no HMAC") }
        return trimmed
    }
}
