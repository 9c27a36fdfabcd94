import CCrypto

/// HMAC-SHA256 through OpenSSL's libcrypto (`HMAC()`, the one-shot call OpenSSL 3 keeps), and a comparison of
/// two MACs that takes the same time wherever they differ (`CRYPTO_memcmp`): the pairing proofs
/// (`SetupKey`).
enum HMACSHA256 {
    /// The 32-byte MAC of `message` under `key`.
    static func mac(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        // SAFETY: every buffer is an array's own storage, alive for the closures; HMAC reads `key.count` and
        // `message.count` bytes and writes at most EVP_MAX_MD_SIZE (the size of `output`) bytes.
        let result = key.withUnsafeBytes { keyBytes in
            message.withUnsafeBytes { messageBytes in
                // SAFETY: `output` is an array of UInt8 of EVP_MAX_MD_SIZE bytes, alive for the closure.
                output.withUnsafeMutableBufferPointer { out in
                    // SAFETY: `message` is an array of UInt8, so its bytes are bound to UInt8 already.
                    let data = messageBytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
                    return HMAC(
                        EVP_sha256(), keyBytes.baseAddress, Int32(keyBytes.count), data, messageBytes.count,
                        out.baseAddress, &length)
                }
            }
        }
        // HMAC with a built-in digest fails only when memory runs out; there is no safe way on.
        precondition(result != nil && length == 32, "HMAC-SHA256 failed")
        return Array(output.prefix(32))
    }

    /// Whether `a` and `b` are equal, in a time that depends on their length only (a proof compared byte by
    /// byte with an early exit would tell an attacker how many of its first bytes were right).
    static func equalInConstantTime(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        // SAFETY: both buffers hold `a.count` bytes and are alive for the closures.
        return a.withUnsafeBytes { left in
            b.withUnsafeBytes { right in CRYPTO_memcmp(left.baseAddress, right.baseAddress, a.count) == 0 }
        }
    }
}
