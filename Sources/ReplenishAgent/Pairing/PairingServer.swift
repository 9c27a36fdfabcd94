import Logging
import NIOCore

/// The pairing endpoints on the network, only while the pairing window is open (`PairingWindowService`);
/// outside it the port is closed.
enum PairingServer {
    static func serveInItsWindow<C: Clock>(
        listen: AgentConfig.Listen, pairing: PairingCoordinator<C>, window: PairingWindowService<C>,
        group: any EventLoopGroup, logger: Logger
    ) async throws where C.Duration == Duration {
        try await window.run { answered in
            await pairing.windowOpened(port: listen.port)
            try await LocalHTTPServer.serve(
                at: .tcp(host: listen.host, port: listen.port), group: group,
                onBound: { port in
                    logger.info(
                        "pairing mode: serving the companion app",
                        metadata: ["pairing.listen": "\(listen.host):\(port ?? listen.port)"])
                }, afterResponse: { response in if response.status == 204 { answered.ring() } },
                handler: { request in await pairing.handle(request) })
        }
    }
}
