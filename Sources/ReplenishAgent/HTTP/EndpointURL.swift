/// A URL the agent is allowed to call: `https://` anywhere, `http://` only on a loopback host (tests and the
/// emulator). Parsed by libcurl's own URL parser (`CurlURL`), the same one that will send the request.
struct EndpointURL: Sendable, CustomStringConvertible {
    let text: String
    let scheme: String
    let host: String

    var description: String { text }

    init(_ text: String) throws(AgentError) {
        let parsed: CurlURL
        do { parsed = try CurlURL(parsing: text) } catch {
            throw AgentError(.configuration, "not a valid URL", cause: error)
        }
        guard let scheme = parsed.scheme?.lowercased(), let host = parsed.host?.lowercased() else {
            throw AgentError(.configuration, "not a valid URL")
        }
        if parsed.user != nil || parsed.query != nil || parsed.fragment != nil {
            throw AgentError(.configuration, "must not carry credentials, a query or a fragment")
        }
        switch scheme {
        case "https": break
        case "http":
            guard Self.isLoopback(host) else {
                throw AgentError(.configuration, "http:// is allowed only for loopback hosts; use https://")
            }
        default:
            throw AgentError(.configuration, "scheme must be https (or http for a loopback host)")
        }
        self.text = text.hasSuffix("/") ? String(text.dropLast()) : text
        self.scheme = scheme
        self.host = host
    }

    /// `localhost`, `127.0.0.0/8` or `[::1]`.
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "[::1]" || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in UInt8(part).map { _ in true } ?? false }
    }

    /// This URL with `path` (starting with "/") appended.
    func appending(_ path: String) -> String { text + path }
}
