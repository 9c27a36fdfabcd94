import Foundation

/// `application/x-www-form-urlencoded` as LWA's endpoints use it; the percent-coding is Foundation's.
enum FormEncoding {
    /// RFC 3986 unreserved: `A-Z a-z 0-9 - . _ ~` (also the PKCE verifier's alphabet).
    static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// Decodes `a=1&b=x+y` into ordered pairs: `+` is a space, `%XX` a byte. Nil when an escape is malformed
    /// or the bytes are not UTF-8.
    static func decode(_ text: String) -> [(name: String, value: String)]? {
        var pairs: [(name: String, value: String)] = []
        for part in text.split(separator: "&", omittingEmptySubsequences: true) {
            let pieces = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = unescape(pieces[0]), let value = pieces.count > 1 ? unescape(pieces[1]) : "" else {
                return nil
            }
            pairs.append((name, value))
        }
        return pairs
    }

    /// Percent-decodes one form component, treating `+` as a space.
    static func unescape(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }

    /// Percent-encodes everything but RFC 3986's unreserved characters.
    static func escape(_ text: String) -> String {
        // Only fails for text that is not valid Unicode, which a Swift `String` cannot hold.
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    /// Encodes ordered pairs as a query string or form body.
    static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { escape($0.0) + "=" + escape($0.1) }.joined(separator: "&")
    }

    /// Whether every character of `text` is unreserved.
    static func isUnreserved(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy(unreserved.contains)
    }
}
