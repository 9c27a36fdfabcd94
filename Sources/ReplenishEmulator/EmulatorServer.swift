import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// The listening socket: HTTP or HTTPS (NIOSSL) on one event-loop thread, every connection answered by an
/// `EmulatorHTTPHandler` sharing one `EmulatorService`.
struct EmulatorServer {
    var host: String
    var port: Int
    var tls: NIOSSLContext?
    var service: EmulatorService

    /// Binds and returns the server channel; its `localAddress` has the bound port.
    func bind(group: MultiThreadedEventLoopGroup) throws -> any Channel {
        let tls = self.tls
        let service = self.service
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                let connection = service.connectionAccepted()
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let tls {
                        try sync.addHandler(NIOSSLServerHandler(context: tls))
                    }
                    try sync.configureHTTPServerPipeline(withErrorHandling: true)
                    try sync.addHandler(EmulatorHTTPHandler(service: service, connection: connection))
                }
            }
        return try bootstrap.bind(host: host, port: port).wait()
    }

    /// A server TLS context from PEM files.
    static func tlsContext(certificatePath: String, keyPath: String) throws -> NIOSSLContext {
        let chain = try NIOSSLCertificate.fromPEMFile(certificatePath).map { NIOSSLCertificateSource.certificate($0) }
        let key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain, privateKey: .privateKey(key))
        configuration.applicationProtocols = ["http/1.1"]
        return try NIOSSLContext(configuration: configuration)
    }
}
