// The Swift floor (scripts/swift-floor.sh): what the device binary's packages cost with none of the agent's
// code. It parses its arguments with ArgumentParser, logs through swift-log, sets up libcurl and links libgpiod,
// serves HTTP/1.1 on loopback with SwiftNIO (a 404 to every request, where the agent serves its pairing
// endpoints) as a service of a swift-service-lifecycle group, says READY=1 and waits; SIGTERM stops it.
import ArgumentParser
import CFloor
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

@main
struct SwiftFloor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "swift-floor")

    @Option(help: "The loopback port to serve on (0: any free one).")
    var port: Int = 0

    func run() async throws {
        let logger = Logger(label: "swift-floor")
        guard cfloor_curl_setup() == 0 else { throw ExitCode(1) }
        logger.debug("libgpiod \(String(cString: cfloor_gpiod_version()))")
        let server = try await HTTPService.bind(port: port)
        guard cfloor_notify_ready() == 0 else { throw ExitCode(1) }
        let group = ServiceGroup(
            configuration: .init(services: [server], gracefulShutdownSignals: [.sigterm], logger: logger))
        try await group.run()
    }
}

struct HTTPService: Service {
    let channel: Channel

    static func bind(port: Int) async throws -> HTTPService {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(NotFound())
                }
            }
            .bind(host: "127.0.0.1", port: port).get()
        return HTTPService(channel: channel)
    }

    func run() async throws {
        try await withGracefulShutdownHandler {
            try await channel.closeFuture.get()
        } onGracefulShutdown: {
            channel.close(promise: nil)
        }
    }
}

final class NotFound: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else { return }
        let head = HTTPResponseHead(
            version: .http1_1, status: .notFound, headers: ["content-length": "0", "connection": "close"])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in context.close(promise: nil) }
    }
}
