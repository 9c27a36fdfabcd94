import FoundationEssentials

/// A PKCE (RFC 7636) code verifier and its S256 challenge. The verifier never leaves the device: only the
/// challenge is served to the companion app; the verifier goes to LWA with the authorization code.
struct PKCE: Sendable {
    let verifier: Secret
    let challenge: String
    let method = "S256"

    /// A fresh pair: 32 bytes from the system's CSPRNG, base64url without padding (43 characters).
    init<R: RandomNumberGenerator>(using generator: inout R) {
        var bytes = [UInt8](repeating: 0, count: 32)
        for index in bytes.indices { bytes[index] = UInt8.random(in: .min ... .max, using: &generator) }
        self.init(verifier: Secret(Self.base64URL(bytes)))
    }

    init() {
        var generator = SystemRandomNumberGenerator()
        self.init(using: &generator)
    }

    /// The pair for a given verifier (for tests against the RFC's vector).
    init(verifier: Secret) {
        self.verifier = verifier
        self.challenge = Self.base64URL(SHA256.hash(Array(verifier.value.utf8)))
    }

    /// base64url (RFC 4648 section 5) without `=` padding.
    static func base64URL(_ bytes: [UInt8]) -> String {
        var text = Data(bytes).base64EncodedString()
        while text.hasSuffix("=") { text.removeLast() }
        return String(text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
    }

    /// A random session id for the pairing exchange (not a secret: it only names the newest session).
    static func randomSessionID() -> String {
        var generator = SystemRandomNumberGenerator()
        return base64URL((0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }
}
