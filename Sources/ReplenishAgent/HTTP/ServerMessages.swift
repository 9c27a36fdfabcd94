import FoundationEssentials
import NIOHTTP1

/// A request to one of the agent's own small servers (pairing endpoints, control socket).
struct ServerRequest: Sendable {
    var method: HTTPMethod
    var path: String
    var body: [UInt8]
    var headers: HTTPHeaders = [:]
    /// The peer's IP address (nil on a Unix socket).
    var peer: String? = nil
    /// What follows the path's `?`, as sent (nil without one).
    var query: String? = nil
}

/// An answer from one of the agent's servers.
struct ServerResponse: Sendable {
    var status: Int
    var body: [UInt8] = []
    var contentType: String? = nil
    var headers: [(name: String, value: String)] = []

    static let noContent = ServerResponse(status: 204)

    static func json<T: Encodable>(_ status: Int, _ value: T) -> ServerResponse {
        let bytes = (try? JSONEncoder().encode(value)).map(Array.init) ?? Array("{}".utf8)
        return ServerResponse(status: status, body: bytes, contentType: "application/json")
    }

    /// `429 TOO_MANY_REQUESTS` with `Retry-After`: `wait` rounded up to whole seconds (at least 1), and the
    /// message "too many WHAT; retry in N s".
    static func tooManyRequests(_ what: String, retryAfter wait: Duration) -> ServerResponse {
        let exact = Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18
        let seconds = max(1, Int(exact.rounded(.up)))
        var answer = error(429, "TOO_MANY_REQUESTS", "too many \(what); retry in \(seconds) s")
        answer.headers = [("Retry-After", "\(seconds)")]
        return answer
    }

    /// `{"error":code,"message":message}`, the pairing endpoints' error shape.
    static func error(_ status: Int, _ code: String, _ message: String) -> ServerResponse {
        json(status, ["error": code, "message": message])
    }
}
