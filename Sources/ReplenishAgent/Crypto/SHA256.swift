import CCrypto

/// SHA-256 through OpenSSL's libcrypto (EVP interface): the agent's one use of a C crypto library (the PKCE
/// code challenge). libcurl loads libcrypto already, so it costs the device nothing.
enum SHA256 {
    /// The 32-byte digest of `bytes`.
    static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        // SAFETY: both buffers are the arrays' own storage, alive for the closures; EVP_Digest reads
        // `input.count` bytes and writes at most EVP_MAX_MD_SIZE (the size of `digest`) bytes of UInt8.
        let ok = bytes.withUnsafeBytes { input in
            digest.withUnsafeMutableBytes { output in
                EVP_Digest(
                    input.baseAddress, input.count, output.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    &length, EVP_sha256(), nil)
            }
        }
        // EVP_Digest with a built-in digest fails only when memory runs out; there is no safe way on.
        precondition(ok == 1 && length == 32, "SHA-256 failed")
        return Array(digest.prefix(32))
    }
}
