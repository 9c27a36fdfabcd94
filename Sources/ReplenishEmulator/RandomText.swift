/// Random identifiers: tokens, codes, order ids and request ids.
enum RandomText {
    private static let alphanumerics = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
    private static let tokenCharacters = alphanumerics + Array("-_")

    /// `count` characters of `A-Z a-z 0-9`.
    static func alphanumeric(_ count: Int) -> String {
        var rng = SystemRandomNumberGenerator()
        return String((0..<count).map { _ in alphanumerics.randomElement(using: &rng)! })
    }

    /// What a customer types: 6 characters of `A-Z 2-9` without the look-alikes `I`, `O`, `0`, `1`.
    static func userCode() -> String {
        var rng = SystemRandomNumberGenerator()
        let letters = Array("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")
        return String((0..<6).map { _ in letters.randomElement(using: &rng)! })
    }

    /// `count` characters of `A-Z a-z 0-9 - _`, like the body of an LWA token.
    static func tokenBody(_ count: Int) -> String {
        var rng = SystemRandomNumberGenerator()
        return String((0..<count).map { _ in tokenCharacters.randomElement(using: &rng)! })
    }

    /// A random UUID-shaped request id.
    static func requestId() -> String {
        var rng = SystemRandomNumberGenerator()
        let hex = (0..<32).map { _ in String(Int.random(in: 0..<16, using: &rng), radix: 16) }.joined()
        let parts = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
            String(hex.dropFirst(range.lowerBound).prefix(range.count))
        }
        return parts.joined(separator: "-")
    }
}
