import Logging
import NIOPosix
import ServiceLifecycle
import Synchronization

/// The daemon's assembly: builds the services and the streams that join them, and runs them as one
/// `ServiceGroup` until SIGTERM/SIGINT. Nothing here decides anything; the README's diagram is this file.
/// - a button press: `GPIOBackend` → `InputPipeline` (debounce) → `PressHandler` → `Orders.accept`
///   (durable outbox) → `Orders.run` → `DRSSession` (the one caller of `DRSClient`);
/// - streams: `TokenManager.events`, `OrderBook.updates`, `PairingWindowKeeper.changes` and (code mode)
///   `CodeLinker.changes`, each read by the services that follow it in their own tasks (lights, status
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
            http: try CurlHTTPClient(options: .init(caFile: config.caFile), name: "lwa-lane"),
            tokenURL: config.lwa.tokenURL,
            clientSecret: config.lwa.clientSecret)
        let drs = DRSClient(
            http: try CurlHTTPClient(options: .init(caFile: config.caFile), name: "drs-lane"),
            baseURL: config.drsBaseURL)
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
            clockTrusted: WallClock.isTrusted(), identity: DeviceIdentity(config.device), logger: logger)
        // Every DRS call of the pairing goes through this one session (token, one refresh on a rejection).
        let session = DRSSession(client: drs, tokens: tokens)
        let status = try SubscriptionBook(stateDirectory: config.stateDirectory) { logger.error("\($0)") }
        let shown = ShownStatusBook(runtimeDirectory: config.runtimeDirectory, logger: logger)
        // This boot, known under the unit's sandbox too (its /proc hides the kernel's boot id), and this run.
        let boot = BootIdentity.current(runtimeDirectory: config.runtimeDirectory, create: true)
        if let problem = RuntimeDirectoryCheck.problem(config.runtimeDirectory) {
            logger.error(
                """
                the runtime directory cannot be used (\(problem)): a restart cannot tell this boot from another, \
                so a call whose answer a restart loses waits for a synchronised clock before it is resent \
                (this run's own calls are not held up)
                """,
                metadata: ["runtime.directory": "\(config.runtimeDirectory)"])
        }
        let run = AgentRun(boot: boot, id: stateDirectory.run)
        let subscriptions = Subscriptions(
            drs: session, status: status, slots: config.slots, clock: clock, wallTime: wallTime, logger: logger)
        let orders = Orders(
            book: try OrderBook(stateDirectory: config.stateDirectory, run: run, wallTime: wallTime, logger: logger),
            slots: config.slots, drs: session, notSubscribed: { await subscriptions.refused(slot: $0) }, clock: clock,
            logger: logger)
        let duties = Duties(
            drs: session, tokens: tokens, status: status,
            checkSubscriptions: { () throws(AgentError) in try await subscriptions.check() }, clock: clock,
            wallTime: wallTime, clockTrusted: { WallClock.isTrusted() }, logger: logger)
        let tracker = OrderTracker(
            drs: session, tokens: tokens, orders: orders.book, slots: config.slots, phase: config.device.phase,
            clock: clock,
            wallTime: wallTime, logger: logger)
        // Pairing: the companion app's endpoints in their window, or code-based linking (no port).
        let window = PairingWindowKeeper(
            length: .seconds(60 * config.pairingWindowMinutes), clock: clock, wallTime: wallTime, logger: logger)
        let linking = try Self.codeLinking(config: config, lwa: lwa, tokens: tokens, clock: clock, logger: logger)
        let pairingEntry: PairingByMode<Clock> =
            linking.map { .code($0) } ?? .window(window, minutes: config.pairingWindowMinutes)
        let deregistration = DeregistrationQueue(
            stateDirectory: config.stateDirectory, lwa: lwa, drs: drs, clock: clock, logger: logger)
        let owner = OwnerCommands(
            reset: FactoryReset(
                stateDirectory: config.stateDirectory, tokens: tokens, orders: orders, status: status,
                deregistration: deregistration, logger: logger, pairingAgain: pairingEntry.afterReset,
                afterWipe: pairingEntry.afterWipe),
            testOrders: TestOrderCancellation(
                phase: config.device.phase, slots: config.slots, tokens: tokens, drs: session,
                record: { [book = orders.book] slots, at throws(AgentError) in
                    try await book.recordTestOrdersCancelled(slots: slots, at: at)
                }, wallTime: wallTime))

        // A pairing from a build before the identity record is this device's: recorded now, at the first start
        // of this build, so that an image cloned from this unit later is caught by the check below.
        do throws(AgentError) {
            if let recorded = try await tokens.recordMissingIdentity() {
                logger.notice(
                    "the pairing had no identity recorded: this device's is recorded with it",
                    metadata: [
                        "device.serial": "\(recorded.serial)", "device.model": "\(recorded.model)",
                        "device.phase": "\(recorded.phase)",
                    ])
            }
        } catch {
            logger.error(
                "could not record the device's identity with the pairing (the next token write records it)",
                metadata: ["error": "\(error.message)"])
        }

        // A pairing made for another serial, model or phase (a serial file changed, a unit moved from the test
        // phase to production, an image cloned from a bench unit) must not order on: its deregistration is
        // queued and the device is pairable again, with the reason in the log and `status`. A serial read from a
        // file that alone differs may be a glitch of this start: the pairing is held (nothing ordered, nothing
        // refreshed) while `SerialWatch` re-reads it, and forgotten only if it keeps reading the new value.
        let forgetForIdentity = { @Sendable (change: String) async throws(AgentError) -> Void in
            let reason = "the device's identity changed (\(change)); pair it again"
            logger.warning(
                "the pairing was made for another identity: deregistering it", metadata: ["reset.reason": "\(reason)"])
            let forgotten = await owner.reset.perform(reason: reason, scope: .pairing, tellDRSNow: false)
            if case .failure(let error) = forgotten {
                logger.error(
                    "could not forget the pairing of the old identity", metadata: ["error": "\(error.message)"])
                throw error
            }
            await shown.recordTokenState(await tokens.state)
        }
        var serialWatch: SerialWatch<Clock>?
        if let change = await tokens.identityChange {
            let device = config.device
            if let recorded = await tokens.pairedIdentity, device.serialSource != .config,
                DeviceIdentity(device).differsOnlyInSerial(from: recorded)
            {
                var settling = SerialSettling<Clock.Instant>(recorded: recorded)
                if case .waiting(_, let reason) = settling.read(DeviceIdentity(device), at: clock.now) {
                    logger.warning(
                        "the serial differs from the pairing's: nothing is ordered while it is re-read",
                        metadata: ["device.change": "\(change)"])
                    await tokens.hold(reason: reason)
                    await shown.recordTokenState(await tokens.state)
                }
                serialWatch = SerialWatch(
                    read: {
                        // On the disk lane: a slow EEPROM or a late mount must not hold the event loop.
                        let read = try? await DiskLane.shared.run { () throws(AgentError) in
                            AgentConfig.readSerial(again: device.serialSource, configured: device.serial)
                        }
                        return (read ?? .failure(.init(message: "the disk lane has stopped"))).map {
                            DeviceIdentity(serial: $0, model: device.model, phase: device.phase.rawValue)
                        }
                    }, recorded: recorded, tokens: tokens, clock: clock, forget: { try? await forgetForIdentity($0) },
                    logger: logger)
            } else {
                try await forgetForIdentity(change)
            }
        }

        // The pairing part of the configured mode (a config without what it needs stops here, before the board).
        let group = MultiThreadedEventLoopGroup.singleton
        let pairing = try Self.pairingPart(
            config: config, lwa: lwa, tokens: tokens, window: window, linking: linking, clock: clock, group: group,
            shown: shown, logger: logger)

        // The board.
        let systemd = SystemdNotifier.fromProcess()
        let backend = try Self.backend(config: config, systemd: systemd)
        let lights = Lights(backend: backend, output: config.board.outputs.first?.name, clock: clock, logger: logger)
        let paired = await tokens.isPaired
        await lights.start(paired: paired, outbox: await orders.book.snapshot)
        let signals = Broadcast<PressMeaning.Signal>()
        let presses = PressHandler(
            config: config,
            effects: DaemonPressEffects(
                orders: orders, tokens: tokens, tracker: tracker, subscriptions: subscriptions, duties: duties,
                signals: signals, openWindow: pairingEntry.open, reset: owner.resetConfirmedWithTheButton),
            clock: clock, logger: logger)
        let inputs = InputPipeline(board: config.board, clock: clock, logger: logger, handler: presses.handle)
        let control = ControlServer(
            backend: backend as? SimulatedBackend, inputs: inputs, lights: lights, board: config.board,
            owner: owner.perform)

        // The streams: every subscription is made here, before any part runs, so none misses an event.
        let linkingChanges = { Self.stream(linking?.changes) }
        // The one event-loop thread, which also runs every task (`LoopExecutor`): pairing endpoints, control
        // socket. Started in this order, stopped in reverse: followers stop before the parts they follow.
        var services: [any Service] = [
            Lights.Part(
                lights: lights, tokens: tokens.events.subscribe { !$0.isRefreshStarting },
                orders: orders.book.updates.subscribe(),
                window: window.changes.subscribe(), linking: linkingChanges(), presses: signals.subscribe()),
            ShownStatusRecorder.Part(
                status: shown, tokens: tokens.events.subscribe(), window: window.changes.subscribe(),
                linking: linkingChanges()),
            LoopPart(service: tokens, description: "tokens"),
            TokenFollowingPart(
                service: orders, tokens: tokens.events.subscribe { $0.letsOrdersGo }, description: "orders"),
            TokenFollowingPart(
                service: duties, tokens: tokens.events.subscribe { $0 == .paired }, description: "duties"),
            OrderTracker.Part(tracker: tracker, orders: orders.book.updates.subscribe()),
            LoopPart(service: deregistration, description: "deregistration"),
            ClockWatch.Part(clock: clock, tokens: tokens, orders: orders, logger: logger),
            pairing,
            InputPipeline.Part(inputs: inputs, backend: backend),
            ControlServer.Part(
                control: control, path: Self.controlSocketPath(stateDirectory: config.stateDirectory), group: group,
                logger: logger),
        ]
        if let serialWatch { services.append(serialWatch) }
        // Last, so that graceful shutdown stops it first (STOPPING=1 as the shutdown begins).
        if let part = await SystemdNotifications.make(
            notifier: systemd, tokens: tokens, orders: orders, backend: backend, group: group,
            pairingMode: config.pairingMode, logger: logger)
        {
            services.append(part)
        }
        await pairingEntry.start(paired: paired)
        logger.info(
            "replenish-agent starting",
            metadata: [
                "device.serial": "\(config.device.serial)", "device.phase": "\(config.device.phase.rawValue)",
                "board": "\(config.board.name)", "paired": "\(paired)",
                "executor": "\(LoopExecutor.installed.description)",
            ])
        if let warning = LoopExecutor.installed.fallbackWarning { logger.warning("\(warning)") }
        // From here on, a durable write on the event loop stops a debug build (`OffLoop`).
        OffLoop.onLoop.withLock { $0 = { MultiThreadedEventLoopGroup.currentEventLoop != nil } }
        OffLoop.serving.store(true, ordering: .relaxed)
        let result = await Result { try await Self.runGroup(services, logger: logger) }
        // Nobody polls for a linking code any more: `status` must not offer it (the next start gets a new one).
        await shown.recordLinkingCode(nil)
        await lights.stop()
        backend.shutdown()
        logger.info("replenish-agent stopped")
        try result.get()
    }

    /// Code-based linking when `pairing.mode` is `code` (nil otherwise).
    private static func codeLinking(
        config: AgentConfig, lwa: LWAClient, tokens: TokenManager<Clock>, clock: Clock, logger: Logger
    ) throws(AgentError) -> CodeLinker<Clock>? {
        guard config.pairingMode == .code else { return nil }
        guard let codePairURL = config.lwa.codePairURL else {
            throw AgentError(.configuration, "lwa.codePairURL: is required when pairing.mode is \"code\"")
        }
        return CodeLinker(
            device: config.device, clientId: config.lwa.clientId,
            client: CodePairClient(lwa: lwa, codePairURL: codePairURL), lwa: lwa, tokens: tokens, clock: clock,
            wallTime: { POSIX.wallTime() }, logger: logger)
    }

    /// The board's GPIO backend: the simulated board, or the chip's lines through libgpiod (with the heartbeat
    /// systemd's watchdog checks).
    private static func backend(config: AgentConfig, systemd: SystemdNotifier) throws -> any GPIOBackend {
        switch config.board.backend {
        case .simulated: SimulatedBackend(board: config.board)
        case .gpiod: try GpiodBackend(board: config.board, heartbeat: SystemdNotifications.gpioHeartbeat(systemd))
        }
    }

    /// The pairing part of the configured mode: the companion app's endpoints served in the pairing window,
    /// or code-based linking (no port).
    private static func pairingPart(
        config: AgentConfig, lwa: LWAClient, tokens: TokenManager<Clock>, window: PairingWindowKeeper<Clock>,
        linking: CodeLinker<Clock>?, clock: Clock, group: MultiThreadedEventLoopGroup, shown: ShownStatusBook,
        logger: Logger
    ) throws(AgentError) -> any Service {
        if let linking {
            return TokenFollowingPart(
                service: linking, tokens: tokens.events.subscribe { $0.isPairingChange }, description: "linking")
        }
        guard let listen = config.pairingListen else {
            throw AgentError(.configuration, "pairing.listen: is required when pairing.mode is \"companion\"")
        }
        if config.pairingSetupKey == nil { logger.warning("\(AgentConfig.setupKeyMissingWarning)") }
        let pairing = PairingCoordinator(
            device: config.device, setupKey: config.pairingSetupKey, clientId: config.lwa.clientId, lwa: lwa,
            tokens: tokens, clock: clock,
            deviceNames: { PairingRequestGuard.deviceNames(listenHost: listen.host) }, logger: logger)
        let advertiser = PairingAdvertiser(
            advertisement: PairingAdvertisement(
                serial: config.device.serial, model: config.device.model, port: listen.port),
            window: window.changes.subscribe(), shown: shown, logger: logger)
        return PairingServer.Part(
            listen: listen, pairing: pairing, window: window, tokens: tokens.events.subscribe { $0.isPairingChange },
            group: group,
            logger: logger, advertiser: advertiser)
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
    private static func runGroup(_ services: [any Service], logger: Logger) async throws {
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
