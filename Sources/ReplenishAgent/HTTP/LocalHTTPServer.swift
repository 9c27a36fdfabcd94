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
}

/// An answer from one of the agent's servers.
struct ServerResponse: Sendable {
    var status: Int
    var body: [UInt8] = []
    var contentType: String? = nil

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
/// Unix socket, bodies capped, one async handler per request. It serves until its task is cancelled.
///
/// The pairing port is open to the local network, so a peer cannot hold it: at most `maximumConnections`
/// connections at once (more are closed on accept), a connection that sends nothing for `idleTimeout` while
/// none of its requests is being answered is closed, and a body over the cap is answered 413 at once and the
/// connection closed.
enum LocalHTTPServer {
    enum Address: Sendable {
        case tcp(host: String, port: Int)
        case unix(path: String)
    }

    typealias Handler = @Sendable (ServerRequest) async -> ServerResponse

    /// Binds, calls `onBound` (with the bound TCP port, if any), and serves until cancelled.
    static func serve(
        at address: Address, group: any EventLoopGroup, maximumBodyBytes: Int = 64 * 1024,
        maximumConnections: Int = 8, idleTimeout: TimeAmount = .seconds(30),
        onBound: @Sendable (Int?) -> Void = { _ in },
        afterResponse: @escaping @Sendable (ServerResponse) -> Void = { _ in },
        handler: @escaping Handler
    ) async throws {
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 16)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        let initializer:
            @Sendable (any Channel) -> EventLoopFuture<NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>> =
                { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: idleTimeout))
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                        try channel.pipeline.syncOperations.addHandler(CloseWhenIdle())
                        return try NIOAsyncChannel(wrappingChannelSynchronously: channel)
                    }
                }
        let server: NIOAsyncChannel<NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, Never>
        switch address {
        case .tcp(let host, let port):
            server = try await bootstrap.bind(host: host, port: port, childChannelInitializer: initializer)
        case .unix(let path):
            server = try await bootstrap.bind(
                unixDomainSocketPath: path, cleanupExistingSocketFile: true,
                childChannelInitializer: initializer)
        }
        onBound(server.channel.localAddress?.port)
        let open = ConnectionCount()
        try await withThrowingDiscardingTaskGroup { group in
            try await server.executeThenClose { connections in
                for try await connection in connections {
                    let admitted = open.count.withLock { count in
                        guard count < maximumConnections else { return false }
                        count += 1
                        return true
                    }
                    guard admitted else {
                        // Closed through the async wrapper (it must finish its writer), here in the accept loop
                        // rather than in a task of its own, so a flood of connections cannot pile up tasks.
                        try? await connection.executeThenClose { _, _ in }
                        continue
                    }
                    group.addTask {
                        defer { open.count.withLock { $0 -= 1 } }
                        try? await serveConnection(
                            connection, maximumBodyBytes: maximumBodyBytes,
                            afterResponse: afterResponse, handler: handler)
                    }
                }
            }
        }
    }

    /// The number of connections being served.
    private final class ConnectionCount: Sendable {
        let count = Mutex(0)
    }

    /// Closes a connection when `IdleStateHandler` reports that nothing was read for the idle timeout, unless
    /// a request is being answered: a companionInfo waiting for LWA, or a simulated press being held, is not
    /// idle however long it takes.
    private final class CloseWhenIdle: ChannelDuplexHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias InboundOut = HTTPServerRequestPart
        typealias OutboundIn = HTTPServerResponsePart
        typealias OutboundOut = HTTPServerResponsePart

        // Touched only on the channel's event loop.
        private var answering = false

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if case .end = unwrapInboundIn(data) { answering = true }
            context.fireChannelRead(data)
        }

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            if case .end = unwrapOutboundIn(data) { answering = false }
            context.write(data, promise: promise)
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if event is IdleStateHandler.IdleStateEvent {
                if !answering { context.close(promise: nil) }
            } else {
                context.fireUserInboundEventTriggered(event)
            }
        }
    }

    private static func serveConnection(
        _ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, maximumBodyBytes: Int,
        afterResponse: @Sendable (ServerResponse) -> Void, handler: Handler
    ) async throws {
        try await connection.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            var body: [UInt8] = []
            func respond(_ response: ServerResponse, to requestHead: HTTPRequestHead, closing: Bool) async throws {
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: "\(response.body.count)")
                if let contentType = response.contentType { headers.add(name: "Content-Type", value: contentType) }
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
            for try await part in inbound {
                switch part {
                case .head(let requestHead):
                    head = requestHead
                    body = []
                case .body(let buffer):
                    guard body.count + buffer.readableBytes <= maximumBodyBytes else {
                        // Answered now, not after the rest: a peer must not keep the server reading forever.
                        guard let requestHead = head else { return }
                        try await respond(
                            .error(413, "INVALID_PARAM", "request body larger than \(maximumBodyBytes) bytes"),
                            to: requestHead, closing: true)
                        return
                    }
                    body.append(contentsOf: buffer.readableBytesView)
                case .end:
                    guard let requestHead = head else { continue }
                    let path = String(requestHead.uri.prefix { $0 != "?" })
                    try await respond(
                        await handler(ServerRequest(method: requestHead.method, path: path, body: body)),
                        to: requestHead, closing: false)
                }
            }
        }
    }
}
