import Logging
import NIOPosix
import ServiceLifecycle

/// The daemon's assembly: builds the services and the streams that join them, and runs them as one
/// `ServiceGroup` until SIGTERM/SIGINT. Nothing here decides anything; the README's diagram is this file.
/// - a button press: `GPIOBackend` → `InputPipeline` (debounce) → `PressHandler` → `OrderService.accept`
///   (durable outbox) → `OrderService.run` → `DRSSession` (the one caller of `DRSClient`);
/// - streams: `TokenManager.events`, `OrderService.updates`, `PairingWindowService.changes` and (code mode)
///   `CodeLinkingService.changes`, each read by the services that follow it in their own tasks (lights, status
///   file, systemd, pairing window or code linking, duties).
struct Agent {
    typealias Clock = ContinuousClock

    let config: AgentConfig
    let logger: Logger

    static func controlSocketPath(stateDirectory: String) -> String {
        StateDirectory.controlSocketPath(stateDirectory)
    }

    /// The LWA and DRS clients, each on a lane of its own (own handle, own thread): no DRS call, however slow,
    /// delays a due token refresh. The daemon and the owner commands that work without it use the same.
    static func lanes(config: AgentConfig) throws(AgentError) -> (lwa: LWAClient, drs: DRSClient) {
        let lwa = LWAClient(
            http: try CurlHTTPClient(options: .init(caFile: config.caFile)), tokenURL: config.lwa.tokenURL,
            clientSecret: config.lwa.clientSecret)
        let drs = DRSClient(http: try CurlHTTPClient(options: .init(caFile: config.caFile)), baseURL: config.drsBaseURL)
        return (lwa, drs)
    }

    func run() async throws {
        // Before any state is read: one agent per state directory, held until `run` returns.
        let stateDirectory = try StateDirectory.open(config.stateDirectory) { [logger] in logger.warning("\($0)") }
        defer { withExtendedLifetime(stateDirectory) {} }
        let (config, logger, clock) = (config, logger, ContinuousClock())
        let wallTime: @Sendable () -> Double = { POSIX.wallTime() }
        // Two lanes (own handle, own thread each): no DRS call, however slow, delays a due token refresh.
        let (lwa, drs) = try Self.lanes(config: config)

        // State and the services that own it.
        let tokens = try TokenManager.open(
            stateDirectory: config.stateDirectory, lwa: lwa, clock: clock, wallTime: wallTime,
            clockTrusted: WallClock.isTrusted(), logger: logger)
        // Every DRS call of the pairing goes through this one session (token, one refresh on a rejection).
        let session = DRSSession(client: drs, tokens: tokens)
        let status = try StatusBook(stateDirectory: config.stateDirectory) { logger.error("\($0)") }
        let orders = try OrderService(
            stateDirectory: config.stateDirectory, slots: config.slots, drs: session, tokens: tokens, status: status,
            clock: clock, wallTime: wallTime, logger: logger)
        let duties = Duties(
            drs: session, tokens: tokens, status: status, slots: config.slots, clock: clock,
            wallTime: wallTime, clockTrusted: { WallClock.isTrusted() }, logger: logger)
        let followUp = OrderFollowUpService(
            drs: session, tokens: tokens, status: status, slots: config.slots, phase: config.device.phase, clock: clock,
            wallTime: wallTime, logger: logger)
        // Pairing: the companion app's endpoints in their window, or code-based linking (no port).
        let window = PairingWindowService(
            length: .seconds(60 * config.pairingWindowMinutes), clock: clock, wallTime: wallTime, logger: logger)
        let linking: CodeLinkingService<Clock>?
        if config.pairingMode == .code {
            guard let codePairURL = config.lwa.codePairURL else {
                throw AgentError(.configuration, "lwa.codePairURL: is required when pairing.mode is \"code\"")
            }
            linking = CodeLinkingService(
                device: config.device, clientId: config.lwa.clientId,
                client: CodePairClient(lwa: lwa, codePairURL: codePairURL), tokens: tokens, clock: clock,
                wallTime: wallTime, logger: logger)
        } else {
            linking = nil
        }
        let deregistration = DeregistrationQueue(
            stateDirectory: config.stateDirectory, lwa: lwa, drs: drs, clock: clock, logger: logger)
        let reset = FactoryReset(
            stateDirectory: config.stateDirectory, tokens: tokens, orders: orders, status: status,
            deregistration: deregistration, logger: logger,
            pairingAgain: config.pairingMode == .code ? "code-based linking starts again" : "pairing window open",
            afterWipe: { await linking?.republish() })
        let testOrders = TestOrderCancellation(
            phase: config.device.phase, slots: config.slots, tokens: tokens, drs: session, status: status,
            wallTime: wallTime)

        // The board.
        let systemd = SystemdNotifier.fromProcess()
        let backend: any GPIOBackend =
            switch config.board.backend {
            case .simulated: SimulatedBackend(board: config.board)
            case .gpiod:
                try GpiodBackend(board: config.board, heartbeat: SystemdService.gpioHeartbeat(systemd))
            }
        let lights = Lights(backend: backend, output: config.board.outputs.first?.name, clock: clock, logger: logger)
        let paired = await tokens.isPaired
        await lights.start(paired: paired, outbox: await orders.snapshot)
        let presses = PressHandler(
            config: config, orders: orders, tokens: tokens, duties: duties, status: status, lights: lights,
            clock: clock, wallTime: wallTime, logger: logger,
            openPairingWindow: { [minutes = config.pairingWindowMinutes] in
                if let linking {
                    await linking.handle(.retryNow)
                    return "code-based linking: enter the code that replenish-agent status shows"
                }
                await window.handle(.longPress)
                return "pairing window open for \(minutes) minutes: pair the device with the companion app"
            },
            factoryReset: { await reset.perform(reason: "factory reset confirmed with the button") },
            followUp: followUp)
        let inputs = InputPipeline(board: config.board, clock: clock, logger: logger) { await presses.handle($0) }
        let control = ControlServer(
            backend: backend as? SimulatedBackend, inputs: inputs, lights: lights, board: config.board,
            owner: { command in
                switch command {
                case .reset:
                    return await reset.perform(reason: "factory reset requested with replenish-agent reset")
                case .deregister:
                    return await reset.perform(
                        reason: "deregistration requested with replenish-agent deregister", scope: .pairing)
                case .cancelTestOrders(let slot):
                    return await testOrders.perform(slot: slot)
                }
            })

        // The streams: every subscription is made here, before any service runs, so none misses an event.
        let (tokensToLights, tokensToStatus, tokensToOrders, tokensToDuties, tokensToWindow) = (
            tokens.events.subscribe(), tokens.events.subscribe(), tokens.events.subscribe(),
            tokens.events.subscribe(), tokens.events.subscribe()
        )
        let (ordersToLights, ordersToFollowUp, windowToLights, windowToStatus) = (
            orders.updates.subscribe(), orders.updates.subscribe(), window.changes.subscribe(),
            window.changes.subscribe()
        )
        let (tokensToLinking, linkingToLights, linkingToStatus) = (
            linking.map { _ in tokens.events.subscribe() }, Self.stream(linking?.changes),
            Self.stream(linking?.changes)
        )
        if let linking {
            await linking.handle(.started(paired: paired))
        } else {
            await window.handle(.started(paired: paired))
        }

        // The one event-loop thread, which also runs every task (`LoopExecutor`): pairing endpoints, control socket.
        let group = MultiThreadedEventLoopGroup.singleton
        // Started in this order, stopped in reverse: followers before the services they follow stop.
        var services: [LoopService] = [
            LoopService(name: "lights") {
                await lights.follow(
                    tokens: tokensToLights, orders: ordersToLights, window: windowToLights, linking: linkingToLights)
            },
            LoopService(name: "status") {
                await StatusRecorder.follow(
                    status: status, tokens: tokensToStatus, window: windowToStatus, linking: linkingToStatus)
            },
            LoopService(name: "tokens") { await tokens.run() },
            LoopService(
                name: "orders", following: { await orders.follow(tokens: tokensToOrders) },
                run: { await orders.run() }),
            LoopService(
                name: "duties", following: { await duties.follow(tokens: tokensToDuties) },
                run: { await duties.run() }),
            LoopService(
                name: "order follow-up", following: { await followUp.follow(orders: ordersToFollowUp) },
                run: { await followUp.run() }),
            LoopService(name: "deregistration") { await deregistration.run() },
            LoopService(name: "clock") {
                try await ClockWatch.run(clock: clock, logger: logger) {
                    await tokens.retryNow()
                    await orders.retryNow()
                }
            },
            Self.pairingService(
                config: config, lwa: lwa, tokens: tokens, window: window, tokensToWindow: tokensToWindow,
                linking: linking, tokensToLinking: tokensToLinking, clock: clock, group: group, logger: logger),
            LoopService(name: "inputs") {
                await inputs.run(edges: backend.edges)
                // The edges end early only when the hardware failed: stop with the reason (systemd restarts
                // the agent, which requests the lines again) rather than run on deaf to the button.
                guard Task.isCancelled else {
                    throw backend.failure ?? AgentError(.hardware, "the GPIO input stream ended")
                }
            },
            LoopService(name: "control") {
                try await control.serve(
                    at: Self.controlSocketPath(stateDirectory: config.stateDirectory), group: group, logger: logger)
            },
        ]
        // Last, so that graceful shutdown stops it first (STOPPING=1 as the shutdown begins).
        if let service = await SystemdService.make(
            notifier: systemd, tokens: tokens, orders: orders, backend: backend, group: group,
            pairingMode: config.pairingMode, logger: logger)
        {
            services.append(service)
        }
        logger.info(
            "replenish-agent starting",
            metadata: [
                "device.serial": "\(config.device.serial)", "device.phase": "\(config.device.phase.rawValue)",
                "board": "\(config.board.name)", "paired": "\(paired)",
                "executor": "\(LoopExecutor.installed.description)",
            ])
        if !LoopExecutor.installed.isLoop {
            logger.warning(
                "Swift Concurrency runs on libdispatch: its worker-pool thread will wake the CPU about once a second",
                metadata: ["executor": "\(LoopExecutor.installed.description)"])
        }
        let result = await Result { try await Self.runGroup(services, logger: logger) }
        // Nobody polls for the code any more: `status` must not offer it (the next start gets a new one).
        if linking != nil { try? await status.update { $0.linking = nil } }
        await lights.stop()
        backend.shutdown()
        logger.info("replenish-agent stopped")
        try result.get()
    }

    /// The pairing service of the configured mode: the companion app's endpoints served in the pairing window,
    /// or code-based linking (no port).
    private static func pairingService(
        config: AgentConfig, lwa: LWAClient, tokens: TokenManager<Clock>, window: PairingWindowService<Clock>,
        tokensToWindow: AsyncStream<TokenEvent>, linking: CodeLinkingService<Clock>?,
        tokensToLinking: AsyncStream<TokenEvent>?, clock: Clock, group: MultiThreadedEventLoopGroup, logger: Logger
    ) -> LoopService {
        if let linking, let tokensToLinking {
            return LoopService(
                name: "linking", following: { await linking.follow(tokens: tokensToLinking) },
                run: { await linking.run() })
        }
        guard let listen = config.pairingListen else {
            return LoopService(name: "pairing") {
                throw AgentError(.configuration, "pairing.listen: is required when pairing.mode is \"companion\"")
            }
        }
        let pairing = PairingCoordinator(
            device: config.device, clientId: config.lwa.clientId, lwa: lwa, tokens: tokens, clock: clock,
            deviceNames: { PairingRequestGuard.deviceNames(listenHost: listen.host) }, logger: logger)
        return LoopService(
            name: "pairing", following: { await window.follow(tokens: tokensToWindow) },
            run: {
                try await PairingServer.serveInItsWindow(
                    listen: listen, pairing: pairing, window: window, group: group, logger: logger)
            })
    }

    /// A subscription to `broadcast`, or a stream that has ended when there is none (the other pairing mode).
    private static func stream<Element: Sendable>(_ broadcast: Broadcast<Element>?) -> AsyncStream<Element> {
        broadcast?.subscribe() ?? AsyncStream { $0.finish() }
    }

    /// One service group; SIGTERM/SIGINT start a graceful shutdown of at most 10 s, below the unit's
    /// TimeoutStopSec (20 s), so systemd never has to SIGKILL a stopping agent. The signals come from the main
    /// thread's sigwait (`TerminationSignals`), not from swift-service-lifecycle's DispatchSource (libdispatch
    /// would start its thread pool and its once-a-second wakeup); only when the entry point did not take them
    /// does the group trap them itself.
    private static func runGroup(_ services: [LoopService], logger: Logger) async throws {
        let owned = TerminationSignals.areOwned
        var configuration = ServiceGroupConfiguration(
            services: services.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) },
            gracefulShutdownSignals: owned ? [] : [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = .seconds(10)
        let group = ServiceGroup(configuration: configuration)
        guard owned else { return try await group.run() }
        let listener = TerminationSignals.listen { signal in
            logger.info("signal \(signal.number) received: stopping gracefully")
            Task { await group.triggerGracefulShutdown() }
        }
        defer { TerminationSignals.stopListening(listener) }
        try await group.run()
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
