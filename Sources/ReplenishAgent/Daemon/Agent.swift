import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// The daemon: wires config, storage, HTTP, tokens, orders, duties, pairing and GPIO together and runs them
/// as one service group until SIGTERM/SIGINT. A newcomer's map:
/// - a button press: `GPIOBackend` → `InputPipeline` (debounce) → `PressHandler` → `OrderService.accept`
///   (durable outbox) → `OrderService.run` → `DRSClient.replenish`;
/// - token refresh: `TokenManager.run`; pairing: `PairingCoordinator` behind `LocalHTTPServer`;
/// - C is called only in `Curl/` (libcurl), `GpiodBackend` and `PKCE`.
struct Agent {
    typealias Clock = ContinuousClock

    let config: AgentConfig
    let logger: Logger

    static func controlSocketPath(stateDirectory: String) -> String { POSIX.join(stateDirectory, "control.sock") }

    func run() async throws {
        // Before any state is read: one agent per state directory, held until `run` returns.
        let stateDirectory = try StateDirectory.open(config.stateDirectory) { [logger] in logger.warning("\($0)") }
        defer { withExtendedLifetime(stateDirectory) {} }
        let clock = ContinuousClock()
        let wallTime: @Sendable () -> Double = { POSIX.wallTime() }
        // Two lanes (own handle, own thread each): no DRS call, however slow, delays a due token refresh.
        let lwaLane = try CurlHTTPClient(options: .init(caFile: config.caFile))
        let drsLane = try CurlHTTPClient(options: .init(caFile: config.caFile))
        let lwa = LWAClient(http: lwaLane, tokenURL: config.lwa.tokenURL, clientSecret: config.lwa.clientSecret)
        let drs = DRSClient(http: drsLane, baseURL: config.drsBaseURL)
        let logger = logger
        let tokens = try Self.makeTokenManager(
            config: config, lwa: lwa, clock: clock, wallTime: wallTime, logger: logger)
        let status = try StatusBook(stateDirectory: config.stateDirectory) { logger.error("\($0)") }
        let orders = try OrderService(
            stateDirectory: config.stateDirectory, slots: config.slots, drs: drs, tokens: tokens, status: status,
            clock: clock, wallTime: wallTime, logger: logger)
        let duties = Duties(
            drs: drs, tokens: tokens, status: status, slots: config.slots, clock: clock,
            wallTime: wallTime, clockTrusted: { WallClock.isTrusted() }, logger: logger)
        let listenHost = config.pairingListen.host
        let pairing = PairingCoordinator(
            device: config.device, clientId: config.lwa.clientId, lwa: lwa, tokens: tokens, clock: clock,
            deviceNames: { PairingRequestGuard.deviceNames(listenHost: listenHost) }, logger: logger)
        let pairingWindow = PairingWindowService(
            length: .seconds(60 * config.pairingWindowMinutes), clock: clock, wallTime: wallTime, logger: logger)
        await tokens.onChange { state in
            await orders.poke()
            try? await status.update { record in
                record.tokenState = state.name
                record.tokenStateReason = state.reason
            }
        }
        await tokens.onPaired { await duties.pairingChanged() }
        await tokens.onPaired { await pairingWindow.handle(.paired) }
        await tokens.onPairingLost { await pairingWindow.handle(.pairingLost) }

        let paired = await tokens.isPaired
        let systemd = SystemdNotifier.fromProcess()
        let backend: any GPIOBackend
        switch config.board.backend {
        case .simulated: backend = SimulatedBackend(board: config.board)
        case .gpiod: backend = try GpiodBackend(board: config.board, heartbeat: SystemdService.gpioHeartbeat(systemd))
        }
        let config = config
        let lights = Lights(backend: backend, output: config.board.outputs.first?.name, clock: clock, logger: logger)
        await Self.connect(lights, to: tokens, orders: orders, paired: paired)
        await pairingWindow.onChange { window in
            await lights.update { $0.pairingWindowOpen = window.open }
            try? await status.update { $0.pairingWindowClosesAt = window.closesAt }
        }
        await pairingWindow.handle(.started(paired: paired))
        let deregistration = DeregistrationQueue(
            stateDirectory: config.stateDirectory, lwa: lwa, drs: drs, clock: clock, logger: logger)
        let reset = FactoryReset(
            stateDirectory: config.stateDirectory, tokens: tokens, orders: orders, status: status, drs: drs,
            deregistration: deregistration, logger: logger)
        let presses = PressHandler(
            config: config, orders: orders, tokens: tokens, duties: duties, status: status, drs: drs,
            lights: lights, clock: clock, wallTime: wallTime, logger: logger,
            openPairingWindow: { await pairingWindow.handle(.longPress) },
            factoryReset: { await reset.perform(reason: "factory reset confirmed with the button") })
        let inputs = InputPipeline(board: config.board, clock: clock, logger: logger) { press in
            await presses.handle(press)
        }

        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var services: [LoopService] = [
            LoopService(name: "tokens") { await tokens.run() },
            LoopService(name: "orders") { await orders.run() },
            LoopService(name: "duties") { await duties.run() },
            LoopService(name: "deregistration") { await deregistration.run() },
            LoopService(name: "clock") {
                // A board without a battery clock: once NTP sets the time, retry what failed meanwhile (TLS
                // "certificate not yet valid") at once instead of at the end of a long backoff.
                guard !WallClock.isTrusted() else { return await Waker().wait(timeout: nil, clock: clock) }
                logger.notice("the wall clock is not set yet (before this build's date); waiting for it")
                while !WallClock.isTrusted() && !Task.isCancelled { try await Task.sleep(for: .seconds(2)) }
                logger.notice("the wall clock is set now; retrying what waited for it")
                await tokens.retryNow()
                await orders.retryNow()
                await Waker().wait(timeout: nil, clock: clock)
            },
            LoopService(name: "pairing") {
                try await Self.servePairingInItsWindow(
                    config: config, pairing: pairing, window: pairingWindow, group: group, logger: logger)
            },
            LoopService(name: "inputs") {
                await inputs.run(edges: backend.edges)
                // The edges end early only when the hardware failed: stop with the reason (systemd restarts
                // the agent, which requests the lines again) rather than run on deaf to the button.
                guard Task.isCancelled else {
                    throw backend.failure ?? AgentError(.hardware, "the GPIO input stream ended")
                }
            },
        ]
        do {
            let control = ControlServer(
                backend: backend as? SimulatedBackend, inputs: inputs, lights: lights, board: config.board,
                reset: { await reset.perform(reason: "factory reset requested with replenish-agent reset") })
            let path = Self.controlSocketPath(stateDirectory: config.stateDirectory)
            services.append(
                LoopService(name: "control") {
                    try await LocalHTTPServer.serve(
                        at: .unix(path: path), group: group,
                        onBound: { _ in
                            // The umask already made it 0600; a failure here is worth a line, not a stop.
                            do { try POSIX.setMode(path, 0o600) } catch {
                                logger.warning("control socket mode", metadata: ["error": "\(error)"])
                            }
                            logger.info(
                                "control socket ready", metadata: ["control.socket": "\(path)"])
                        }, handler: { request in await control.handle(request) })
                })
        }
        // Last, so that graceful shutdown stops it first (STOPPING=1 as the shutdown begins).
        if let service = await SystemdService.make(
            notifier: systemd, tokens: tokens, orders: orders, backend: backend, group: group, logger: logger)
        {
            services.append(service)
        }
        logger.info(
            "replenish-agent starting",
            metadata: [
                "device.serial": "\(config.device.serial)", "device.phase": "\(config.device.phase.rawValue)",
                "board": "\(config.board.name)", "paired": "\(paired)",
            ])
        var groupConfiguration = ServiceGroupConfiguration(
            services: services.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) },
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        // Below the unit's TimeoutStopSec (20 s), so systemd never has to SIGKILL a stopping agent.
        groupConfiguration.maximumGracefulShutdownDuration = .seconds(10)
        let serviceGroup = ServiceGroup(configuration: groupConfiguration)
        let result: Result<Void, any Error>
        do {
            try await serviceGroup.run()
            result = .success(())
        } catch { result = .failure(error) }
        await lights.stop()
        backend.shutdown()
        try? await group.shutdownGracefully()
        logger.info("replenish-agent stopped")
        try result.get()
    }

    /// Keeps the LED's facts up to date with the token lifecycle and the outbox.
    static func connect(
        _ lights: Lights<Clock>, to tokens: TokenManager<Clock>, orders: OrderService<Clock>, paired: Bool
    ) async {
        let snapshot = await orders.snapshot
        await lights.update { facts in
            facts.paired = paired
            facts.pendingOrders = snapshot.pending.count
            facts.parkedOrders = snapshot.parked.count
        }
        await tokens.onChange { state in
            await lights.update { facts in
                switch state {
                case .fresh, .refreshing:
                    facts.paired = true
                    facts.tokenFault = false
                case .retryWait:
                    facts.paired = true
                    facts.tokenFault = true
                case .unpaired, .needsPairing:
                    facts.paired = false
                    facts.tokenFault = false
                }
            }
        }
        await orders.onEvent { event, outbox in
            await lights.update { facts in
                facts.pendingOrders = outbox.pending.count
                facts.parkedOrders = outbox.parked.count
                switch event {
                case .retrying(_, let network): facts.lastAttemptFailedForNetwork = network
                case .acknowledged: facts.lastAttemptFailedForNetwork = false
                default: break
                }
            }
            if case .acknowledged = event { await lights.orderPlaced() }
        }
    }

    /// The token manager over the token file. A corrupt token file is moved aside and reported, and the
    /// agent starts unpaired rather than not at all.
    static func makeTokenManager(
        config: AgentConfig, lwa: LWAClient, clock: Clock, wallTime: @escaping @Sendable () -> Double,
        logger: Logger
    ) throws(AgentError) -> TokenManager<Clock> {
        let store = FileTokenStore(stateDirectory: config.stateDirectory)
        do {
            return try TokenManager(
                store: store, lwa: lwa, clock: clock, wallTime: wallTime, clockTrusted: WallClock.isTrusted(),
                logger: logger)
        } catch {
            guard error.code == .storage, try store.load() == nil else { throw error }
            logger.error("\(error.message)")
            return try TokenManager(
                store: store, lwa: lwa, clock: clock, wallTime: wallTime, clockTrusted: WallClock.isTrusted(),
                logger: logger)
        }
    }

    /// Serves the pairing endpoints while the pairing window is open (`PairingWindowService`); outside it
    /// the port is closed.
    static func servePairingInItsWindow(
        config: AgentConfig, pairing: PairingCoordinator<Clock>, window: PairingWindowService<Clock>,
        group: any EventLoopGroup, logger: Logger
    ) async throws {
        let listen = config.pairingListen
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

#if canImport(Glibc)
    import Glibc
#endif
