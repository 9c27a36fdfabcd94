import CCrypto

/// SHA-256 through OpenSSL's libcrypto (EVP interface): the agent's one use of a C crypto library (the PKCE
/// code challenge). libcurl loads libcrypto already, so it costs the device nothing.
enum SHA256 {
    /// The 32-byte digest of `bytes`.
    static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        // SAFETY: both buffers are the arrays' own storage, alive for the closures; EVP_Digest reads
        // `input.count` bytes and writes at most EVP_MAX_MD_SIZE (the size of `digest`) bytes.
        let ok = bytes.withUnsafeBytes { input in
            // SAFETY: `digest` is an array of UInt8, so its bytes are bound to UInt8 already.
            digest.withUnsafeMutableBytes { output in
                let out = output.baseAddress?.assumingMemoryBound(to: UInt8.self)
                return EVP_Digest(input.baseAddress, input.count, out, &length, EVP_sha256(), nil)
            }
        }
        // EVP_Digest with a built-in digest fails only when memory runs out; there is no safe way on.
        precondition(ok == 1 && length == 32, "SHA-256 failed")
        return Array(digest.prefix(32))
    }
}
