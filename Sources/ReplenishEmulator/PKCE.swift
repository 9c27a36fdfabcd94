import Foundation

/// Checks a PKCE `code_verifier` against the challenge recorded with a code (RFC 7636).
///
/// SHA-256 comes from the `openssl` command line tool: the emulator links no crypto library of its own, and
/// an independent implementation keeps a misunderstanding in the agent's PKCE code from hiding here.
enum PKCE {
    /// Whether `verifier` has RFC 7636's form: 43 to 128 characters of `A-Z a-z 0-9 - . _ ~`.
    static func isWellFormedVerifier(_ verifier: String) -> Bool {
        (43...128).contains(verifier.utf8.count) && FormEncoding.isUnreserved(verifier)
    }

    /// Whether `challenge` could be a challenge of `method` (`S256`: 43 base64url characters).
    static func isWellFormedChallenge(_ challenge: String, method: String) -> Bool {
        switch method {
        case "S256":
            // base64url's alphabet: the unreserved characters less `.` and `~`.
            return challenge.utf8.count == 43 && FormEncoding.isUnreserved(challenge)
                && !challenge.contains(where: { $0 == "." || $0 == "~" })
        case "plain":
            return isWellFormedVerifier(challenge)
        default:
            return false
        }
    }

    /// Whether `verifier` answers `challenge`; nil when the hash could not be computed.
    static func verify(verifier: String, challenge: String, method: String) -> Bool? {
        switch method {
        case "plain":
            return verifier == challenge
        case "S256":
            guard let digest = sha256(Array(verifier.utf8)) else { return nil }
            return base64url(digest) == challenge
        default:
            return false
        }
    }

    /// `base64url` without padding (RFC 4648 section 5).
    static func base64url(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// SHA-256 through `openssl dgst -sha256 -binary`.
    static func sha256(_ input: [UInt8]) -> [UInt8]? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: OpenSSLTool.path)
        process.arguments = ["dgst", "-sha256", "-binary"]
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            return nil
        }
        // The verifier is at most 128 bytes and the digest 32: neither pipe can fill up and block.
        stdin.fileHandleForWriting.write(Data(input))
        try? stdin.fileHandleForWriting.close()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0, output.count == 32 else { return nil }
        return Array(output)
    }
}
