import Logging
import NIOCore

/// The pairing endpoints on the network, only while the pairing window is open (`PairingWindowKeeper`);
/// outside it the port is closed.
enum PairingServer {
    static func serveInItsWindow<C: Clock>(
        listen: AgentConfig.Listen, pairing: PairingCoordinator<C>, window: PairingWindowKeeper<C>,
        group: any EventLoopGroup, logger: Logger
    ) async throws where C.Duration == Duration {
        await window.run { answered in
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

extension PairingServer {
    /// The companion app's pairing as the daemon runs it: the endpoints in their window, the window following
    /// the token events (a pairing closes it, a lost pairing opens it).
    struct Part<C: Clock>: DaemonPart where C.Duration == Duration {
        let listen: AgentConfig.Listen
        let pairing: PairingCoordinator<C>
        let window: PairingWindowKeeper<C>
        let tokens: AsyncStream<TokenEvent>
        let group: any EventLoopGroup
        let logger: Logger
        /// The DNS-SD advertisement of the port while the window is open (nil: none).
        var advertiser: PairingAdvertiser<C>? = nil
        var description: String { "pairing" }

        func follow() async {
            await withDiscardingTaskGroup { tasks in
                if let advertiser { tasks.addTask { await advertiser.run() } }
                await window.follow(tokens: tokens)
                tasks.cancelAll()
            }
        }
        func work() async throws {
            try await PairingServer.serveInItsWindow(
                listen: listen, pairing: pairing, window: window, group: group, logger: logger)
        }
    }
}
