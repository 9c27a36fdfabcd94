import FoundationEssentials
import NIOCore
import NIOHTTP1
import NIOPosix

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
enum LocalHTTPServer {
    enum Address: Sendable {
        case tcp(host: String, port: Int)
        case unix(path: String)
    }

    typealias Handler = @Sendable (ServerRequest) async -> ServerResponse

    /// Binds, calls `onBound` (with the bound TCP port, if any), and serves until cancelled.
    static func serve(at address: Address, group: any EventLoopGroup, maximumBodyBytes: Int = 64 * 1024,
                      onBound: @Sendable (Int?) -> Void = { _ in },
                      afterResponse: @escaping @Sendable (ServerResponse) -> Void = { _ in },
                      handler: @escaping Handler) async throws
    {
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 16)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        let initializer: @Sendable (any Channel) -> EventLoopFuture<NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>> = { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                return try NIOAsyncChannel(wrappingChannelSynchronously: channel)
            }
        }
        let server: NIOAsyncChannel<NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, Never>
        switch address {
        case .tcp(let host, let port):
            server = try await bootstrap.bind(host: host, port: port, childChannelInitializer: initializer)
        case .unix(let path):
            server = try await bootstrap.bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true,
                                              childChannelInitializer: initializer)
        }
        onBound(server.channel.localAddress?.port)
        try await withThrowingDiscardingTaskGroup { group in
            try await server.executeThenClose { connections in
                for try await connection in connections {
                    group.addTask {
                        try? await serveConnection(connection, maximumBodyBytes: maximumBodyBytes,
                                                   afterResponse: afterResponse, handler: handler)
                    }
                }
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
            var tooLarge = false
            for try await part in inbound {
                switch part {
                case .head(let requestHead):
                    head = requestHead
                    body = []
                    tooLarge = false
                case .body(let buffer):
                    if body.count + buffer.readableBytes > maximumBodyBytes {
                        tooLarge = true
                    } else {
                        body.append(contentsOf: buffer.readableBytesView)
                    }
                case .end:
                    guard let requestHead = head else { continue }
                    let path = String(requestHead.uri.prefix { $0 != "?" })
                    let response = tooLarge
                        ? ServerResponse.error(413, "INVALID_PARAM", "request body larger than \(maximumBodyBytes) bytes")
                        : await handler(ServerRequest(method: requestHead.method, path: path, body: body))
                    var headers = HTTPHeaders()
                    headers.add(name: "Content-Length", value: "\(response.body.count)")
                    if let contentType = response.contentType { headers.add(name: "Content-Type", value: contentType) }
                    if tooLarge { headers.add(name: "Connection", value: "close") }
                    let status = HTTPResponseStatus(statusCode: response.status)
                    try await outbound.write(.head(HTTPResponseHead(version: requestHead.version, status: status, headers: headers)))
                    if !response.body.isEmpty { try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: response.body)))) }
                    try await outbound.write(.end(nil))
                    afterResponse(response)
                    if tooLarge { return }
                }
            }
        }
    }
}
