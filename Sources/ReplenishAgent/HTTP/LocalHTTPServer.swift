import FoundationEssentials
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A request to one of the agent's own small servers (pairing endpoints, control socket).
struct ServerRequest: Sendable {
    var method: HTTPMethod
    var path: String
    var body: [UInt8]
    var headers: HTTPHeaders = [:]
    /// The peer's IP address (nil on a Unix socket).
    var peer: String? = nil
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

    /// `{"error":code,"message":message}`, the pairing endpoints' error shape.
    static func error(_ status: Int, _ code: String, _ message: String) -> ServerResponse {
        json(status, ["error": code, "message": message])
    }
}

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
/// (SwiftNIO's `HTTPServerPipelineHandler` holds the next until the previous answer is out). A request that
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
    }

    typealias Handler = @Sendable (ServerRequest) async -> ServerResponse

    private struct Accepted: Sendable {
        var channel: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>
        var tracker: ConnectionTracker
    }

    /// Binds, calls `onBound` (with the bound TCP port, if any), and serves until cancelled.
    static func serve(
        at address: Address, group: any EventLoopGroup, limits: Limits = Limits(),
        onBound: @Sendable (Int?) -> Void = { _ in },
        afterResponse: @escaping @Sendable (ServerResponse) -> Void = { _ in },
        handler: @escaping Handler
    ) async throws {
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            // A peer's half-close is an event (`ChannelEvent.inputClosed`), not the end of the connection: a
            // client that sends its request and shuts down its sending side still gets its answer.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
        let decoderLimits = {
            var configuration = NIOHTTPDecoderLimitConfiguration()
            configuration.maxHeaderListSize = limits.maximumHeaderBytes
            configuration.maxHeaderFieldSize = limits.maximumHeaderBytes
            configuration.maxHeaderFieldCount = limits.maximumHeaderCount
            return configuration
        }()
        let initializer: @Sendable (any Channel) -> EventLoopFuture<Accepted> = { channel in
            channel.eventLoop.makeCompletedFuture {
                let tracker = ConnectionTracker()
                let sync = channel.pipeline.syncOperations
                try sync.addHandler(
                    LingeringClose(
                        time: limits.lingerTime, idle: limits.lingerIdle, bytes: limits.lingerBytes, tracker: tracker))
                try sync.configureHTTPServerPipeline(
                    withErrorHandling: false, withEncoderConfiguration: .init(),
                    withDecoderLimitConfiguration: decoderLimits)
                try sync.addHandler(ParseErrorAnswer())
                try sync.addHandler(RequestDeadline(deadline: limits.requestDeadline, tracker: tracker))
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
        onBound(server.channel.localAddress?.port)
        let book = ConnectionBook(limits: limits)
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
                                handler: handler)
                        }
                    }
                }
            }
        }
        try await withTaskCancellationHandler {
            try await acceptor.value
        } onCancel: {
            server.channel.close(promise: nil)
            for channel in book.closeAll() {
                channel.triggerUserOutboundEvent(LingeringClose.CloseNow(), promise: nil)
            }
        }
        try Task.checkCancellation()
    }

    /// What the server knows of one connection, shared between its event loop and the accept loop.
    final class ConnectionTracker: Sendable {
        /// A complete request is being answered: the connection is busy, not slow.
        let answering = Atomic(false)
        /// Answered with an error and closing (lingering close).
        let lingering = Atomic(false)
        /// Since when (`NIODeadline` nanoseconds) the connection owes a request: its start, or the end of
        /// its last answer.
        let waitingSince = Atomic(NIODeadline.now().uptimeNanoseconds)

        /// What `ConnectionAdmission` needs to know.
        func state(now: UInt64, grace: UInt64) -> ConnectionAdmission.State {
            if answering.load(ordering: .relaxed) { return .answering }
            if lingering.load(ordering: .relaxed) { return .lingering }
            let since = waitingSince.load(ordering: .relaxed)
            return now >= since && now - since >= grace ? .slow : .fresh
        }
    }

    /// The open connections and which one makes room for a new one (`ConnectionAdmission`).
    private final class ConnectionBook: Sendable {
        private struct Entry {
            var id: Int
            var peer: String
            var tracker: ConnectionTracker
            var channel: any Channel
        }

        private let limits: Limits
        private let state = Mutex<(next: Int, open: [Entry], closing: Bool)>((0, [], false))

        init(limits: Limits) { self.limits = limits }

        /// The server stops: every open connection (to be closed), and no more admitted.
        func closeAll() -> [any Channel] {
            state.withLock { state in
                state.closing = true
                return state.open.map(\.channel)
            }
        }

        /// The new connection's id and the connection it evicts, or nil when it is refused.
        func admit(peer: String, tracker: ConnectionTracker, channel: any Channel) -> (Int, (any Channel)?)? {
            state.withLock { state in
                if state.closing { return nil }
                let now = NIODeadline.now().uptimeNanoseconds
                let grace = UInt64(limits.freshGrace.nanoseconds)
                let decision = ConnectionAdmission.decide(
                    peer: peer,
                    open: state.open.map {
                        ConnectionAdmission.Connection(
                            id: $0.id, peer: $0.peer, state: $0.tracker.state(now: now, grace: grace))
                    },
                    maximum: limits.maximumConnections, maximumPerPeer: limits.maximumConnectionsPerPeer)
                var victim: (any Channel)?
                switch decision {
                case .refuse: return nil
                case .admit: break
                case .admitEvicting(let id):
                    if let index = state.open.firstIndex(where: { $0.id == id }) {
                        victim = state.open.remove(at: index).channel
                    }
                }
                state.next += 1
                state.open.append(Entry(id: state.next, peer: peer, tracker: tracker, channel: channel))
                return (state.next, victim)
            }
        }

        func remove(_ id: Int) { state.withLock { $0.open.removeAll { $0.id == id } } }
    }

    private static func serveConnection(
        _ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, peer: String?, limits: Limits,
        afterResponse: @Sendable (ServerResponse) -> Void, handler: @escaping Handler
    ) async throws {
        let channel = connection.channel
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
                    let request = ServerRequest(
                        method: requestHead.method, path: path, body: body, headers: requestHead.headers, peer: peer)
                    // A request that asks to close is the connection's last: answered, then a lingering close
                    // (what the peer pipelined after it is read and discarded, so no reset destroys the answer).
                    let keepAlive = requestHead.isKeepAlive
                    if !keepAlive { channel.triggerUserOutboundEvent(LingeringClose.Arm(), promise: nil) }
                    try await respond(await answer(request, on: channel, handler), to: requestHead, closing: !keepAlive)
                    if !keepAlive { return }
                    head = nil
                    body = []
                }
            }
        }
    }
}

extension LocalHTTPServer {
    /// Runs the handler for one request, cancelled as soon as its connection closes: the server stopping closes
    /// every connection (so a stop never waits for a long request, such as a held simulated press or a reset
    /// waiting on DRS), and a client that went away needs no answer.
    fileprivate static func answer(_ request: ServerRequest, on channel: any Channel, _ handler: @escaping Handler)
        async
        -> ServerResponse
    {
        let work = Task { await handler(request) }
        channel.closeFuture.whenComplete { _ in work.cancel() }
        return await withTaskCancellationHandler {
            await work.value
        } onCancel: {
            work.cancel()
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

/// Which connection makes room for a new one. Pure.
enum ConnectionAdmission {
    /// Which connections give way first: slow ones (owing a request for longer than the grace), then
    /// those closing after an error answer, then fresh ones; one being answered never.
    enum State: Int, Comparable {
        case slow, lingering, fresh, answering

        static func < (lhs: State, rhs: State) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    struct Connection: Equatable {
        var id: Int
        var peer: String
        var state: State
    }

    enum Decision: Equatable {
        case admit
        case admitEvicting(Int)
        case refuse
    }

    /// `open` is in the order the connections were admitted. A peer at its own cap makes room among its own
    /// connections; a full server evicts from the peer holding the most. The oldest slow connection goes,
    /// else the oldest closing one, else the oldest fresh one; when every candidate is being answered, the
    /// new connection is refused.
    static func decide(peer: String, open: [Connection], maximum: Int, maximumPerPeer: Int) -> Decision {
        var perPeer: [String: Int] = [:]
        for connection in open { perPeer[connection.peer, default: 0] += 1 }
        let candidates: [Connection]
        if perPeer[peer, default: 0] >= maximumPerPeer {
            candidates = open.filter { $0.peer == peer }
        } else if open.count >= maximum {
            let most = perPeer.values.max() ?? 0
            let crowded = Set(perPeer.filter { $0.value == most }.keys)
            candidates = open.filter { crowded.contains($0.peer) }
        } else {
            return .admit
        }
        // The first of the lowest state: the oldest of its kind.
        guard let victim = candidates.filter({ $0.state != .answering }).min(by: { $0.state < $1.state }) else {
            return .refuse
        }
        return .admitEvicting(victim.id)
    }
}

/// Closes a connection whose request does not arrive whole within the deadline: from the connection's
/// start, then again from each answer's end. A request being answered is not timed.
private final class RequestDeadline: ChannelDuplexHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let deadline: TimeAmount
    private let tracker: LocalHTTPServer.ConnectionTracker
    // Touched only on the channel's event loop.
    private var timer: Scheduled<Void>?

    init(deadline: TimeAmount, tracker: LocalHTTPServer.ConnectionTracker) {
        self.deadline = deadline
        self.tracker = tracker
    }

    func handlerAdded(context: ChannelHandlerContext) { arm(context: context) }

    func handlerRemoved(context: ChannelHandlerContext) { timer?.cancel() }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .end = unwrapInboundIn(data) {
            timer?.cancel()
            timer = nil
            tracker.answering.store(true, ordering: .relaxed)
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            tracker.waitingSince.store(NIODeadline.now().uptimeNanoseconds, ordering: .relaxed)
            tracker.answering.store(false, ordering: .relaxed)
            arm(context: context)
        }
        context.write(data, promise: promise)
    }

    private func arm(context: ChannelHandlerContext) {
        timer?.cancel()
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: deadline) {
            loopBound.value.triggerUserOutboundEvent(LingeringClose.CloseNow(), promise: nil)
        }
    }
}

/// Answers what SwiftNIO's parser refused: a head over the size or field-count limits gets 431, anything
/// else unparsable 400; then the connection closes (lingering). Like `HTTPServerProtocolErrorHandler`,
/// with the endpoints' JSON error shape and the 431.
private final class ParseErrorAnswer: ChannelDuplexHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private var responseStarted = false
    /// An error answer went out: the connection says nothing more (a late answer of the request handler
    /// would be a second response).
    private var answeredError = false
    /// An answer with `Connection: close` went out: what the parser finds after it (a request pipelined
    /// after one that asked to close) is not answered.
    private var answeredClosing = false

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        // A connection that closed in the middle of a request (the parser's EOF error) gets no answer.
        // A peer that half-closed in the middle of a request is still there to read the 400.
        if !responseStarted && !answeredError && !answeredClosing && context.channel.isActive {
            let tooLarge = parserError == .headerOverflow
            let answer = ServerResponse.error(
                tooLarge ? 431 : 400, "INVALID_PARAM",
                tooLarge ? "request head too large or with too many fields" : "malformed HTTP request")
            var headers = HTTPHeaders()
            headers.add(name: "Connection", value: "close")
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Content-Length", value: "\(answer.body.count)")
            context.triggerUserOutboundEvent(LingeringClose.Arm(), promise: nil)
            let head = HTTPResponseHead(
                version: .http1_1, status: HTTPResponseStatus(statusCode: answer.status), headers: headers)
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: answer.body)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            answeredError = true
        }
        // The decoder closes the channel next (lingering, as armed above).
        context.close(promise: nil)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !answeredError else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        switch unwrapOutboundIn(data) {
        case .head(let head):
            responseStarted = true
            if head.headers[canonicalForm: "connection"].contains(where: { $0.lowercased() == "close" }) {
                answeredClosing = true
            }
        case .end: responseStarted = false
        case .body: break
        }
        context.write(data, promise: promise)
    }
}

/// The "lingering close" of nginx and Apache, nearest the socket. Once armed (an answer that ends the
/// connection early, such as a 413 while the peer is still uploading), input is discarded instead of
/// parsed, and a close becomes: flush the answer, shut down the sending side, keep reading and discarding
/// until the peer closes, `time` has passed or `bytes` were discarded, then close. Closing at once would make
/// the kernel answer the unread upload with a reset, which can destroy the answer before the peer reads it.
/// `CloseNow` closes at once (deadline, eviction). A peer that half-closed has nothing left to send: then
/// a close (armed or not) flushes the answer and closes, and a lingering close ends.
private final class LingeringClose: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Arm: Sendable {}
    struct CloseNow: Sendable {}

    private let time: TimeAmount
    private let idle: TimeAmount
    private let bytes: Int
    private let tracker: LocalHTTPServer.ConnectionTracker
    // Touched only on the channel's event loop.
    private var armed = false
    private var lingering = false
    /// The peer half-closed (`ChannelEvent.inputClosed`): no more input will come.
    private var inputClosed = false
    /// The lingering close flushed the answer.
    private var answerOut = false
    private var discarded = 0
    private var lingerStarted = NIODeadline.now()
    private var lastRead = NIODeadline.now()
    private var timer: Scheduled<Void>?
    private var closePromise: EventLoopPromise<Void>?

    init(time: TimeAmount, idle: TimeAmount, bytes: Int, tracker: LocalHTTPServer.ConnectionTracker) {
        self.time = time
        self.idle = idle
        self.bytes = bytes
        self.tracker = tracker
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard armed else {
            context.fireChannelRead(data)
            return
        }
        discarded += unwrapInboundIn(data).readableBytes
        lastRead = .now()
        if discarded > bytes { finish(context: context) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if armed {
            // Keep reading: nothing above asks for more once the request is answered.
            if lingering { context.read() }
            return
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case ChannelEvent.inputClosed = event else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        inputClosed = true
        if lingering {
            // What the lingering close waited for: the peer is done sending (once the answer is out; if it
            // is not yet, the flush's completion closes).
            if answerOut { finish(context: context) }
        } else if !armed {
            // Once armed, the answer that ends the connection is out or going: the parser above must not
            // see the end of an unfinished request and answer it a second time.
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        closePromise?.succeed()
        closePromise = nil
        context.fireChannelInactive()
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        switch event {
        case is Arm:
            armed = true
            tracker.lingering.store(true, ordering: .relaxed)
            promise?.succeed()
        case is CloseNow:
            promise?.succeed()
            finish(context: context)
        default:
            context.triggerUserOutboundEvent(event, promise: promise)
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard armed || inputClosed, mode == .all else {
            context.close(mode: mode, promise: promise)
            return
        }
        if let closePromise, let promise {
            closePromise.futureResult.cascade(to: promise)
        } else if let promise {
            closePromise = promise
        }
        guard !lingering else { return }
        lingering = true
        lingerStarted = .now()
        lastRead = lingerStarted
        schedule(context: context)
        // An empty write completes after everything written before it: then the answer is out.
        let flushed = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(ByteBuffer()), promise: flushed)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        flushed.futureResult.whenComplete { _ in
            let (handler, context) = loopBound.value
            handler.answerOut = true
            // A peer that half-closed sends nothing more: nothing to read and discard.
            if handler.inputClosed {
                handler.finish(context: context)
            } else {
                context.close(mode: .output, promise: nil)
            }
        }
        if !inputClosed { context.read() }
    }

    /// Wakes at the end of the lingering time or of the idle time, whichever comes first.
    private func schedule(context: ChannelHandlerContext) {
        let end = min(lingerStarted + time, lastRead + idle)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: end) {
            let (handler, context) = loopBound.value
            if NIODeadline.now() >= min(handler.lingerStarted + handler.time, handler.lastRead + handler.idle) {
                handler.finish(context: context)
            } else {
                handler.schedule(context: context)
            }
        }
    }

    private func finish(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        let promise = closePromise
        closePromise = nil
        context.close(mode: .all, promise: promise)
    }
}
