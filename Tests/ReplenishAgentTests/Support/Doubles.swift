import Foundation
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

/// An HTTP client whose every answer waits until the test opens the gate: for what happens while a request
/// is out.
final class GatedHTTPClient: HTTPClient, Sendable {
    private let response: HTTPResponse
    private let gate: (stream: AsyncStream<Void>, continuation: AsyncStream<Void>.Continuation)
    private let started = Mutex(0)
    private let arrivals: (stream: AsyncStream<Void>, continuation: AsyncStream<Void>.Continuation)

    init(_ response: HTTPResponse) {
        self.response = response
        gate = AsyncStream.makeStream(of: Void.self)
        arrivals = AsyncStream.makeStream(of: Void.self)
    }

    /// Returns when the next request (counted from the start) has reached the client: no polling.
    func requestArrived() async {
        for await _ in arrivals.stream { break }
    }

    /// Requests that reached the client.
    var requestCount: Int { started.withLock { $0 } }

    /// Lets one waiting request have its answer.
    func open() { gate.continuation.yield() }

    func send(_ request: HTTPRequest) async throws(AgentError) -> HTTPResponse {
        started.withLock { $0 += 1 }
        arrivals.continuation.yield()
        for await _ in gate.stream { break }
        return response
    }
}

/// A token store in memory, counting writes; `failSaves` makes every save fail as a full disk would.
final class MemoryTokenStore: TokenStore, Sendable {
    private let state: Mutex<(tokens: TokenSet?, saves: Int, failSaves: Bool)>

    init(_ tokens: TokenSet? = nil) { state = Mutex((tokens, 0, false)) }

    var tokens: TokenSet? { state.withLock { $0.tokens } }
    var saves: Int { state.withLock { $0.saves } }
    var failSaves: Bool {
        get { state.withLock { $0.failSaves } }
        set { state.withLock { $0.failSaves = newValue } }
    }

    func load(on lane: borrowing DiskLane.Context) throws(AgentError) -> TokenSet? { tokens }
    func save(_ tokens: TokenSet, isolation: isolated (any Actor)? = #isolation) async throws(AgentError) {
        try state.withLock { (state) throws(AgentError) in
            if state.failSaves { throw AgentError(.storage, "no space left on device") }
            state = (tokens, state.saves + 1, false)
        }
    }
    func wipe(isolation: isolated (any Actor)? = #isolation) async throws(AgentError) {
        state.withLock { $0.tokens = nil }
    }
}

func json(_ status: Int, _ text: String, headers: [(String, String)] = []) -> HTTPResponse {
    HTTPResponse(status: status, headers: headers, body: Array(text.utf8))
}

/// A fresh private temporary directory.
func temporaryDirectory() -> String {
    var template = Array("/tmp/replenish-test-XXXXXX".utf8CString)
    return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
}

/// The package's root folder, found from this file's path.
func packageRoot(file: String = #filePath) -> String {
    var path = file
    while let slash = path.lastIndex(of: "/") {
        path = String(path[..<slash])
        if FileManager.default.fileExists(atPath: path + "/Package.swift") { return path }
    }
    return "."
}

#if canImport(Glibc)
    import Glibc
#endif

/// A value shared between a test and the doubles it scripts.
final class Locked<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>
    init(_ value: Value) { storage = Mutex(value) }
    var value: Value {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}

extension Duties where C == ManualClock {
    /// Duties over `drs` (at 127.0.0.1:1), with their own `Subscriptions`, both recording in `status`.
    static func testing(
        drs: any HTTPClient, tokens: TokenManager<ManualClock>, status: SubscriptionBook, slots: [String],
        clock: ManualClock, wallTime: @escaping @Sendable () -> Double,
        clockTrusted: @escaping @Sendable () -> Bool = { true }
    ) throws -> (duties: Duties, subscriptions: Subscriptions<ManualClock>) {
        let session = DRSSession(
            client: DRSClient(http: drs, baseURL: try EndpointURL("http://127.0.0.1:1")), tokens: tokens)
        let subscriptions = Subscriptions(
            drs: session, subscriptionBook: status, slots: slots, clock: clock, wallTime: wallTime,
            logger: .init(label: "test"))
        let duties = Duties(
            drs: session, tokens: tokens, subscriptionBook: status,
            checkSubscriptions: { () throws(AgentError) in try await subscriptions.check() }, clock: clock,
            wallTime: wallTime, clockTrusted: clockTrusted, logger: .init(label: "test"))
        return (duties, subscriptions)
    }
}
