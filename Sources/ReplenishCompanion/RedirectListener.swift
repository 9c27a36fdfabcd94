import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// The local redirect URI: a tiny HTTP listener on 127.0.0.1 that takes LWA's redirect (the browser's
/// `GET /callback?code=…&state=…`), answers the browser, and hands the query to the companion.
final class RedirectListener: Sendable {
    let port: Int
    private let channel: any Channel
    private let redirects: AsyncStream<[String: String]>

    private init(port: Int, channel: any Channel, redirects: AsyncStream<[String: String]>) {
        self.port = port
        self.channel = channel
        self.redirects = redirects
    }

    static func start(port: Int) async throws -> RedirectListener {
        let (stream, sink) = AsyncStream.makeStream(of: [String: String].self)
        let channel: any Channel
        do {
            channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { child in
                    child.pipeline.configureHTTPServerPipeline().flatMap {
                        child.pipeline.addHandler(Handler(sink: sink))
                    }
                }
                .bind(host: "127.0.0.1", port: port).get()
        } catch {
            throw Failure("cannot listen for the redirect on 127.0.0.1:\(port): \(error)")
        }
        return RedirectListener(port: channel.localAddress?.port ?? port, channel: channel, redirects: stream)
    }

    /// The first redirect's query fields; fails after `seconds`.
    func waitForRedirect(seconds: Int) async throws -> [String: String] {
        defer { channel.close(promise: nil) }
        let redirects = self.redirects
        return try await withThrowingTaskGroup(of: [String: String]?.self) { group in
            group.addTask {
                for await fields in redirects { return fields }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            guard let first else { throw Failure("no redirect from LWA within \(seconds) s") }
            return first
        }
    }

    private final class Handler: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let sink: AsyncStream<[String: String]>.Continuation

        init(sink: AsyncStream<[String: String]>.Continuation) { self.sink = sink }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .head(let head) = unwrapInboundIn(data) else { return }
            let parts = head.uri.split(separator: "?", maxSplits: 1)
            let isCallback = parts.first == "/callback" && parts.count == 2
            let text = isCallback ? "Done: you can close this page.\n" : "Not found\n"
            var headers = HTTPHeaders([("Content-Type", "text/plain"), ("Connection", "close")])
            headers.add(name: "Content-Length", value: "\(text.utf8.count)")
            let status: HTTPResponseStatus = isCallback ? .ok : .notFound
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))),
                promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: text)))), promise: nil)
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
            if isCallback { sink.yield(Form.decode(parts[1])) }
        }
    }
}
