import NIOCore
import NIOHTTP1
import NIOPosix

/// The listening socket: plain HTTP on one event-loop thread, every connection answered by an
/// `EmulatorHTTPHandler` sharing one `EmulatorService`. HTTPS is a TLS terminator's job in front of it (README's
/// "Dependencies, and why").
struct EmulatorServer {
    var host: String
    var port: Int
    var service: EmulatorService

    /// Binds and returns the server channel; its `localAddress` has the bound port.
    func bind(group: MultiThreadedEventLoopGroup) throws -> any Channel {
        let service = self.service
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                let connection = service.connectionAccepted()
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.configureHTTPServerPipeline(withErrorHandling: true)
                    try sync.addHandler(EmulatorHTTPHandler(service: service, connection: connection))
                }
            }
        return try bootstrap.bind(host: host, port: port).wait()
    }

}
