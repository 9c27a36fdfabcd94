import Synchronization

@testable import ReplenishAgent

/// An HTTP client that answers from a script and records every request.
final class ScriptedHTTPClient: HTTPClient, Sendable {
    typealias Responder = @Sendable (HTTPRequest) throws(AgentError) -> HTTPResponse
    private let responder: Responder
    private let log = Mutex<[HTTPRequest]>([])

    init(_ responder: @escaping Responder) { self.responder = responder }

    var requests: [HTTPRequest] { log.withLock { $0 } }

    func send(_ request: HTTPRequest) async throws(AgentError) -> HTTPResponse {
        log.withLock { $0.append(request) }
        return try responder(request)
    }
}

/// A token store in memory, counting writes.
final class MemoryTokenStore: TokenStore, Sendable {
    private let state: Mutex<(tokens: TokenSet?, saves: Int)>

    init(_ tokens: TokenSet? = nil) { state = Mutex((tokens, 0)) }

    var tokens: TokenSet? { state.withLock { $0.tokens } }
    var saves: Int { state.withLock { $0.saves } }

    func load() throws(AgentError) -> TokenSet? { tokens }
    func save(_ tokens: TokenSet) throws(AgentError) { state.withLock { $0 = (tokens, $0.saves + 1) } }
    func wipe() throws(AgentError) { state.withLock { $0.tokens = nil } }
}

func json(_ status: Int, _ text: String, headers: [(String, String)] = []) -> HTTPResponse {
    HTTPResponse(status: status, headers: headers, body: Array(text.utf8))
}

/// A fresh private temporary directory.
func temporaryDirectory() -> String {
    var template = Array("/tmp/replenish-test-XXXXXX".utf8CString)
    return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
}

#if canImport(Glibc)
    import Glibc
#endif
