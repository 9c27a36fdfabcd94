/// An outgoing HTTP request. `body` may hold secrets (form fields), so requests are never logged whole.
struct HTTPRequest: Sendable {
    enum Method: String, Sendable {
        case get = "GET"
        case post = "POST"
        case delete = "DELETE"
    }

    var method: Method
    var url: String
    var headers: [(String, String)] = []
    var body: [UInt8]? = nil
    /// Total time allowed for the request, connect included.
    var timeoutSeconds: Int = 30
}

/// An answer from a server. Header names are lowercased.
struct HTTPResponse: Sendable {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.0 == lower }?.1
    }
}

/// Sends HTTP requests. The device uses `CurlHTTPClient`; tests use in-memory doubles.
protocol HTTPClient: Sendable {
    /// Sends `request`; throws `AgentError` with code `.network` when no answer came (or an answer too
    /// large to accept). Any status code is an answer.
    func send(_ request: HTTPRequest) async throws(AgentError) -> HTTPResponse
}
