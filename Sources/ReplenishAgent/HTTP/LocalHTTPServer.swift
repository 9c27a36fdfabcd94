import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The agent's HTTP server: SwiftNIO's HTTP/1.1 parser and pipeline (no hand-written parsing) on TCP or a
/// Unix socket, one async handler per request. It serves until its task is cancelled.
///
/// The pairing port is open to the local network, so no peer may hold it or make it hold memory (`Limits`):
/// - a request (head and body) must arrive whole within `requestDeadline` of the connection's start or of
///   the previous answer, or the connection is closed (a peer trickling a byte now and then included);
///   while a request is being answered nothing is timed (a companionInfo waiting for LWA, a held press);
/// - heads over `maximumHeaderBytes` or with more than `maximumHeaderCount` fields get `431`, other
///   unparsable input `400`, a body over `maximumBodyBytes` (declared or sent) `413`; each answered at once,
///   then the connection closed after a lingering close (`LingeringClose`) so that the answer is not lost
///   to a reset while the peer is still sending;
/// - at most `maximumConnections` connections at once and `maximumConnectionsPerPeer` per peer address; a
///   connection over either cap evicts one that is not being answered (of that peer, or of the peer with
///   the most connections; slow ones first, see `ConnectionAdmission`), so a crowd of slow or idle peers
///   cannot keep a new client out: a client that sends its request at once is being answered before it
///   could be evicted.
///
/// Requests on one connection are answered one at a time in the order they came, pipelined ones included
/// (SwiftNIO's `HTTPServerPipelineHandler` holds the next until the previous answer is out), also when the
/// server stops (within `drainTime`: see `RequestDeadline.Drain`). A request that
/// asks to close (`Connection: close`, HTTP/1.0 without keep-alive) is answered with `Connection: close`
/// and the connection ends after a lingering close; whatever was sent after it is not answered. A peer
/// that half-closes (`shutdown(SHUT_WR)`) after its requests still gets every answer, then the connection
/// closes; one that half-closes without a request is closed at once.
enum LocalHTTPServer {
    enum Address: Sendable {
        case tcp(host: String, port: Int)
        case unix(path: String)
    }

    struct Limits: Sendable {
        var maximumBodyBytes = 64 * 1024
        var maximumHeaderBytes = 8 * 1024
        var maximumHeaderCount = 64
        var requestDeadline: TimeAmount = .seconds(10)
        var maximumConnections = 64
        var maximumConnectionsPerPeer = 8
        /// A new connection is not evicted before slower ones until it has owed its request this long.
        var freshGrace: TimeAmount = .seconds(1)
        /// How long, and how much, a lingering close reads and discards before it closes (nginx:
        /// `lingering_time` 30 s, `lingering_timeout` 5 s): at most `lingerTime` in all, and at most
        /// `lingerIdle` without a byte.
        var lingerTime: TimeAmount = .seconds(30)
        var lingerIdle: TimeAmount = .seconds(5)
        var lingerBytes = 16 << 20
        /// When the server stops, how long a connection may take to answer what it has received (pipelined
        /// requests included) before it is closed at once, so that a stop stays bounded.
        var drainTime: TimeAmount = .seconds(1)
    }

    typealias Handler = @Sendable (ServerRequest) async -> ServerResponse

    private struct Accepted: Sendable {
        var channel: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>
        var tracker: ConnectionTracker
    }

    /// Binds, calls `onBound` (with the bound TCP port, if any), and serves until cancelled.
    static func serve(
        at address: Address, group: any EventLoopGroup, limits: Limits = Limits(),
        onBound: @Sendable (Int?) async -> Void = { _ in },
        afterResponse: @escaping @Sendable (ServerResponse) -> Void = { _ in },
        handler: @escaping Handler
    ) async throws {
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            // A peer's half-close is an event (`ChannelEvent.inputClosed`), not the end of the connection: a
            // client that sends its request and shuts down its sending side still gets its answer.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
        let initializer: @Sendable (any Channel) -> EventLoopFuture<Accepted> = { channel in
            channel.eventLoop.makeCompletedFuture {
                let tracker = ConnectionTracker()
                try addHandlers(to: channel.pipeline.syncOperations, limits: limits, tracker: tracker)
                let wrapper: any AsyncWrapping.Type = ClosingOnDeinit.self
                return Accepted(channel: try wrapper.wrap(channel), tracker: tracker)
            }
        }
        let server: NIOAsyncChannel<Accepted, Never>
        switch address {
        case .tcp(let host, let port):
            server = try await bootstrap.bind(host: host, port: port, childChannelInitializer: initializer)
        case .unix(let path):
            server = try await bootstrap.bind(
                unixDomainSocketPath: path, cleanupExistingSocketFile: true,
                childChannelInitializer: initializer)
        }
        await onBound(server.channel.localAddress?.port)
        let book = ConnectionBook(limits: limits)
        let handlers = Handlers()
        // Every accepted connection must be taken out of the stream and closed through its async wrapper
        // (one dropped unconsumed would trap), so the accept loop is not cancelled: cancelling closes the
        // listening socket and every open connection, and the loop drains what is left and ends.
        let acceptor = Task {
            try await withThrowingDiscardingTaskGroup { group in
                try await server.executeThenClose { connections in
                    for try await accepted in connections {
                        let channel = accepted.channel.channel
                        let peer = channel.remoteAddress?.ipAddress
                        guard
                            let admitted = book.admit(
                                peer: peer ?? "local", tracker: accepted.tracker, channel: channel)
                        else {
                            // Closed here in the accept loop rather than in a task of its own, so a flood of
                            // connections cannot pile up tasks.
                            try? await accepted.channel.executeThenClose { _, _ in }
                            continue
                        }
                        let (id, victim) = admitted
                        victim?.triggerUserOutboundEvent(LingeringClose.CloseNow(), promise: nil)
                        group.addTask {
                            defer { book.remove(id) }
                            try? await serveConnection(
                                accepted.channel, peer: peer, limits: limits, afterResponse: afterResponse,
                                handlers: handlers, handler: handler)
                        }
                    }
                }
            }
        }
        try await withTaskCancellationHandler {
            try await acceptor.value
        } onCancel: {
            server.channel.close(promise: nil)
            // Each connection answers what it has received, then closes (an idle one at once): a request pipelined
            // behind the one that closes the pairing window gets its answer. The handlers are cancelled, so a long
            // one (a held press, a reset waiting on DRS) answers at once; a connection still not done when the
            // drain time is up is closed then.
            for channel in book.closeAll() {
                channel.triggerUserOutboundEvent(RequestDeadline.Drain(), promise: nil)
                channel.eventLoop.scheduleTask(in: limits.drainTime) {
                    channel.triggerUserOutboundEvent(LingeringClose.CloseNow(), promise: nil)
                }
            }
            handlers.cancelAll()
        }
        try Task.checkCancellation()
    }

    /// A connection's pipeline, nearest the socket first: the lingering close, SwiftNIO's HTTP/1.1 parser and
    /// pipelining within `limits`, the answers to what the parser refused, the request deadline.
    static func addHandlers(
        to pipeline: ChannelPipeline.SynchronousOperations, limits: Limits, tracker: ConnectionTracker
    ) throws {
        var decoderLimits = NIOHTTPDecoderLimitConfiguration()
        decoderLimits.maxHeaderListSize = limits.maximumHeaderBytes
        decoderLimits.maxHeaderFieldSize = limits.maximumHeaderBytes
        decoderLimits.maxHeaderFieldCount = limits.maximumHeaderCount
        try pipeline.addHandler(
            LingeringClose(
                time: limits.lingerTime, idle: limits.lingerIdle, bytes: limits.lingerBytes, tracker: tracker))
        try pipeline.configureHTTPServerPipeline(
            withErrorHandling: false, withEncoderConfiguration: .init(), withDecoderLimitConfiguration: decoderLimits)
        try pipeline.addHandler(ParseErrorAnswer())
        try pipeline.addHandler(RequestDeadline(deadline: limits.requestDeadline, tracker: tracker))
    }

    private static func serveConnection(
        _ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, peer: String?, limits: Limits,
        afterResponse: @Sendable (ServerResponse) -> Void, handlers: Handlers, handler: @escaping Handler
    ) async throws {
        let channel = connection.channel
        let connectionHandlers = Handlers()
        channel.closeFuture.whenComplete { _ in connectionHandlers.cancelAll() }
        try await connection.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            var body: [UInt8] = []
            func respond(_ response: ServerResponse, to requestHead: HTTPRequestHead, closing: Bool) async throws {
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: "\(response.body.count)")
                if let contentType = response.contentType { headers.add(name: "Content-Type", value: contentType) }
                for (name, value) in response.headers { headers.add(name: name, value: value) }
                if closing { headers.add(name: "Connection", value: "close") }
                let status = HTTPResponseStatus(statusCode: response.status)
                try await outbound.write(
                    .head(HTTPResponseHead(version: requestHead.version, status: status, headers: headers)))
                if !response.body.isEmpty {
                    try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: response.body))))
                }
                try await outbound.write(.end(nil))
                afterResponse(response)
            }
            /// Answers 413 at once and closes after a lingering close: a peer must not keep the server
            /// reading forever, and must get the answer rather than a reset.
            func refuseBody(_ requestHead: HTTPRequestHead) async throws {
                channel.triggerUserOutboundEvent(LingeringClose.Arm(), promise: nil)
                try await respond(
                    .error(413, "INVALID_PARAM", "request body larger than \(limits.maximumBodyBytes) bytes"),
                    to: requestHead, closing: true)
            }
            // The stream ends when the peer half-closes (or the connection closes): every request read
            // before that has been answered by then.
            for try await part in inbound {
                switch part {
                case .head(let requestHead):
                    head = requestHead
                    body = []
                    let declared = requestHead.headers["Content-Length"].first.flatMap { Int($0) } ?? 0
                    if declared > limits.maximumBodyBytes {
                        try await refuseBody(requestHead)
                        return
                    }
                case .body(let buffer):
                    guard body.count + buffer.readableBytes <= limits.maximumBodyBytes else {
                        guard let requestHead = head else { return }
                        try await refuseBody(requestHead)
                        return
                    }
                    body.append(contentsOf: buffer.readableBytesView)
                case .end:
                    guard let requestHead = head else { continue }
                    let path = String(requestHead.uri.prefix { $0 != "?" })
                    let query = requestHead.uri.firstIndex(of: "?").map {
                        String(requestHead.uri[requestHead.uri.index(after: $0)...])
                    }
                    let request = ServerRequest(
                        method: requestHead.method, path: path, body: body, headers: requestHead.headers, peer: peer,
                        query: query)
                    // A request that asks to close is the connection's last: answered, then a lingering close
                    // (what the peer pipelined after it is read and discarded, so no reset destroys the answer).
                    let keepAlive = requestHead.isKeepAlive
                    if !keepAlive { channel.triggerUserOutboundEvent(LingeringClose.Arm(), promise: nil) }
                    let response = await answer(request, [handlers, connectionHandlers], handler)
                    try await respond(response, to: requestHead, closing: !keepAlive)
                    if !keepAlive { return }
                    head = nil
                    body = []
                }
            }
        }
    }
}

extension LocalHTTPServer {
    /// Runs the handler for one request, cancelled as soon as its connection closes (one close callback for each
    /// connection: one per request held every finished task until the close) or the server stops (a stop never
    /// waits for a long request, such as a held press; one handled after the stop began is cancelled at once).
    fileprivate static func answer(
        _ request: ServerRequest, _ groups: [Handlers], _ handler: @escaping Handler
    ) async -> ServerResponse {
        let work = Task { await handler(request) }
        let keys = groups.map { $0.add(work) }
        defer { for (group, key) in zip(groups, keys) { group.remove(key) } }
        return await withTaskCancellationHandler {
            await work.value
        } onCancel: {
            work.cancel()
        }
    }

    /// The handlers answering requests, cancelled together when the server stops (or their connection closes).
    final class Handlers: Sendable {
        private let state = Mutex<(next: Int, running: [Int: Task<ServerResponse, Never>], stopped: Bool)>(
            (0, [:], false))

        /// Registers a running handler, cancelled at once when the server has stopped; returns its key.
        func add(_ task: Task<ServerResponse, Never>) -> Int {
            let (key, stopped) = state.withLock { state in
                state.next += 1
                state.running[state.next] = task
                return (state.next, state.stopped)
            }
            if stopped { task.cancel() }
            return key
        }

        func remove(_ key: Int) { _ = state.withLock { $0.running.removeValue(forKey: key) } }

        /// The server stops: every handler running, and every one started from now on, is cancelled.
        func cancelAll() {
            let running = state.withLock { state in
                state.stopped = true
                return Array(state.running.values)
            }
            for task in running { task.cancel() }
        }
    }
}

/// Wraps an accepted connection so that it closes itself if it is dropped unconsumed: a connection that
/// arrives while the server closes can be dropped by SwiftNIO between the initializer and the accept loop,
/// and the non-deprecated wrapper traps on that ("Deinited NIOAsyncWriter without calling finish()").
/// The deprecated initializer is reached through this protocol so that its warning stays here.
private protocol AsyncWrapping {
    static func wrap(_ channel: any Channel) throws -> NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>
}

private enum ClosingOnDeinit: AsyncWrapping {
    @available(
        *, deprecated, message: "SwiftNIO deprecates closing on deinit; the server needs it for dropped connections"
    )
    static func wrap(_ channel: any Channel) throws -> NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart> {
        try NIOAsyncChannel(synchronouslyWrapping: channel)
    }
}
