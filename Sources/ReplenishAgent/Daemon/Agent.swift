import Logging
import NIOPosix
import ServiceLifecycle

/// The daemon's assembly: builds the services and the streams that join them, and runs them as one
/// `ServiceGroup` until SIGTERM/SIGINT. Nothing here decides anything: what the start decides (the pairing
/// against this device's identity, the LED's start, serving, the pairing's start after `READY=1`) is `StartUp`'s,
/// called at its moments; docs/architecture.md's walk of the parts is this file.
/// - a button press: `GPIOBackend` → `InputPipeline` (debounce) → `PressHandler` → `DeliveryLoop.accept`
///   (durable outbox) → `DeliveryLoop.run` → `DRSSession` (the one maker of a DRS request);
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
    static func lanes(config: AgentConfig, for what: String) throws(AgentError) -> (lwa: LWAClient, drs: DRSClient) {
        let settings = try config.drsSettings(for: what)
        let lwa = LWAClient(
            http: try CurlHTTPClient(options: .init(caFile: config.caFile), name: "lwa-lane"),
            tokenURL: settings.lwa.tokenURL,
            clientSecret: settings.lwa.clientSecret)
        let drs = DRSClient(
            http: try CurlHTTPClient(options: .init(caFile: config.caFile), name: "drs-lane"),
            baseURL: settings.baseURL)
        return (lwa, drs)
    }

    func run() async throws {
        // Before any state is read: one agent per state directory, held until `run` returns.
        // The start's own reads and writes run here, before the loop serves; the context ends with the assembly.
        let lane = DiskLane.Context.beforeServing()
        let stateDirectory = try StateDirectory.open(config.stateDirectory, on: lane) { [logger] in
            logger.warning("\($0)")
        }
        defer { withExtendedLifetime(stateDirectory) {} }
        let (config, logger, clock) = (config, logger, ContinuousClock())
        let wallTime: @Sendable () -> Double = { POSIX.wallTime() }
        // Two lanes (own handle, own thread each): no DRS call, however slow, delays a due token refresh.
        let (lwa, drs) = try Self.lanes(config: config, for: "the daemon of program drs")
        let lwaSettings = try config.drsSettings(for: "the daemon of program drs").lwa

        // State and the services that own it.
        let tokens = try TokenManager.open(
            stateDirectory: config.stateDirectory, lwa: lwa, clock: clock, wallTime: wallTime,
            clockTrusted: WallClock.isTrusted(), identity: DeviceIdentity(config.device), logger: logger,
            loadingOn: lane)
        // Every DRS call of the pairing goes through this one session (token, one refresh on a rejection).
        let session = DRSSession(client: drs, tokens: tokens)
        let subscriptionBook = try SubscriptionBook(
            stateDirectory: config.stateDirectory, onCorrupt: { logger.error("\($0)") }, loadingOn: lane)
        let shown = ShownStatusBook(runtimeDirectory: config.runtimeDirectory, run: stateDirectory.run, logger: logger)
        // This boot, known under the unit's sandbox too (its /proc hides the kernel's boot id), and this run.
        let boot = StartUp<Clock>.thisBoot(runtimeDirectory: config.runtimeDirectory, logger: logger, on: lane)
        let run = AgentRun(boot: boot, id: stateDirectory.run)
        let subscriptions = Subscriptions(
            drs: session, subscriptionBook: subscriptionBook, slots: config.slots, clock: clock, wallTime: wallTime,
            logger: logger)
        let orders = DeliveryLoop(
            book: try OrderBook(
                stateDirectory: config.stateDirectory, run: run, wallTime: wallTime, logger: logger, loadingOn: lane),
            slots: config.slots, drs: session, notSubscribed: { await subscriptions.refused(slot: $0) }, clock: clock,
            logger: logger)
        let duties = Duties(
            drs: session, tokens: tokens, subscriptionBook: subscriptionBook,
            checkSubscriptions: { () throws(AgentError) in try await subscriptions.check() }, clock: clock,
            wallTime: wallTime, clockTrusted: { WallClock.isTrusted() }, logger: logger)
        let tracker = OrderTracker(
            drs: session, tokens: tokens, orders: orders.book, slots: config.slots, phase: config.device.phase,
            clock: clock,
            wallTime: wallTime, logger: logger)
        // Pairing: the companion app's endpoints in their window, or code-based linking (no port).
        let window = PairingWindowKeeper(
            length: .seconds(60 * config.pairingWindowMinutes), clock: clock, wallTime: wallTime, logger: logger)
        let linking = try Self.codeLinking(
            config: config, settings: lwaSettings, lwa: lwa, tokens: tokens, clock: clock, logger: logger)
        let pairingEntry: PairingByMode<Clock> =
            linking.map { .code($0) } ?? .window(window, minutes: config.pairingWindowMinutes)
        let deregistration = DeregistrationQueue(
            stateDirectory: config.stateDirectory, lwa: lwa, drs: drs, clock: clock, logger: logger)
        let owner = OwnerCommands(
            reset: FactoryReset(
                stateDirectory: config.stateDirectory, tokens: tokens, orders: orders,
                subscriptionBook: subscriptionBook,
                deregistration: deregistration, logger: logger, pairingAgain: pairingEntry.afterReset,
                afterWipe: pairingEntry.afterWipe),
            testOrders: TestOrderCancellation(
                phase: config.device.phase, slots: config.slots, tokens: tokens, drs: session,
                record: { [book = orders.book] slots, at throws(AgentError) in
                    try await book.recordTestOrdersCancelled(slots: slots, at: at)
                }, wallTime: wallTime))

        // Every state file is loaded: from here on, blocking file work runs on a lane.
        _ = consume lane
        // The start-up's first moment, before any part follows a stream: the pairing against this device's
        // identity (`StartUp.checkIdentity`).
        let startUp = StartUp(
            config: config, tokens: tokens, orders: orders, reset: owner.reset, pairing: pairingEntry, shown: shown,
            clock: clock, logger: logger, disk: .shared)
        let startUpParts = try await startUp.checkIdentity()

        // The pairing part of the configured mode (a config without what it needs stops here, before the board).
        let group = MultiThreadedEventLoopGroup.singleton
        let pairing = try Self.pairingPart(
            config: config, clientId: lwaSettings.clientId, lwa: lwa, tokens: tokens, window: window, linking: linking,
            clock: clock, group: group,
            shown: shown, logger: logger)

        // The board.
        let systemd = SystemdNotifier.fromProcess()
        let board = try Self.board(config: config, systemd: systemd)
        let backend = board.backend
        let lights = Lights(backend: backend, output: config.board.outputs.first?.name, clock: clock, logger: logger)
        let signals = Broadcast<PressMeaning.Signal>()
        let wifiSetup = Self.wifiSetup(
            config: config, clock: clock, group: group, lights: lights, shown: shown, logger: logger,
            joined: { if await !tokens.isPaired { _ = await pairingEntry.open() } })
        var wifiLongPress: (@Sendable () async -> String?)?
        if let wifiSetup { wifiLongPress = { await wifiSetup.longPress() } }
        let presses = PressHandler(
            config: config, outbox: orders, book: orders.book, tracker: tracker, subscriptions: subscriptions,
            effects: DaemonPressEffects(
                tokens: tokens, duties: duties, signals: signals, openWindow: pairingEntry.open,
                reset: owner.resetConfirmedWithTheButton, wifiSetup: wifiLongPress),
            clock: clock, logger: logger)
        let waiters = PressWaiters()
        let inputs = InputPipeline(
            board: config.board, clock: clock, logger: logger, requests: waiters, handler: presses.handle)
        let control = ControlServer(
            backend: board.simulated, inputs: inputs, waiters: waiters, lights: lights, board: config.board,
            owner: owner.perform)

        // The streams: every subscription is made here, before any part runs, so none misses an event.
        let linkingChanges = { Self.stream(linking?.changes) }
        // The one event-loop thread, which also runs every task (`LoopExecutor`): pairing endpoints, control
        // socket. Started in this order, stopped in reverse: followers stop before the parts they follow.
        var services: [any DaemonPart] = [
            Lights.Part(
                lights: lights, tokens: tokens.events.subscribe { !$0.isRefreshStarting },
                orders: orders.book.updates.subscribe(),
                window: window.changes.subscribe(), linking: linkingChanges(), presses: signals.subscribe()),
            ShownStatusRecorder.Part(
                status: shown, tokens: tokens.events.subscribe(), window: window.changes.subscribe(),
                linking: linkingChanges()),
            LoopPart(service: tokens, description: "tokens"),
            TokenFollowingPart(
                service: orders, tokens: tokens.events.subscribe { $0.letsOrdersGo }, description: "delivery"),
            TokenFollowingPart(
                service: duties, tokens: tokens.events.subscribe { $0 == .paired }, description: "duties"),
            OrderTracker.Part(tracker: tracker, orders: orders.book.updates.subscribe()),
            LoopPart(service: deregistration, description: "deregistration"),
            ClockWatch.Part(clock: clock, tokens: tokens, orders: orders, logger: logger),
            pairing,
            InputPipeline.Part(inputs: inputs, backend: backend),
            ControlServer.Part(
                control: control, path: Self.controlSocketPath(stateDirectory: config.stateDirectory), group: group,
                disk: .shared, logger: logger),
        ]
        services += startUpParts
        if let wifiSetup { services.append(WiFiSetup<Clock>.Part(setup: wifiSetup)) }
        // Last, so that graceful shutdown stops it first (STOPPING=1 as the shutdown begins); the pairing starts
        // once READY=1 is out.
        let notifications = await SystemdNotifications.make(
            notifier: systemd, tokens: tokens, orders: orders, gpioBeats: board.beats, group: group,
            pairingMode: config.pairingMode, logger: logger, afterReady: { await startUp.startPairing() })
        if let notifications { services.append(notifications) }
        // The start-up's second moment, every follower subscribed: the LED's start, "starting" (and without
        // systemd the pairing's start).
        await startUp.begin(lights: lights, startsPairing: notifications == nil)
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
        config: AgentConfig, settings: AgentConfig.LWA, lwa: LWAClient, tokens: TokenManager<Clock>, clock: Clock,
        logger: Logger
    ) throws(AgentError) -> CodeLinker<Clock>? {
        guard config.pairingMode == .code else { return nil }
        guard let codePairURL = settings.codePairURL else {
            throw AgentError(.configuration, "lwa.codePairURL: is required when pairing.mode is \"code\"")
        }
        return CodeLinker(
            device: config.device, clientId: settings.clientId,
            client: CodePairClient(lwa: lwa, codePairURL: codePairURL), lwa: lwa, tokens: tokens, clock: clock,
            wallTime: { POSIX.wallTime() }, logger: logger)
    }

    /// The board's GPIO backend: the simulated board, or the chip's lines through libgpiod (with the heartbeat
    /// systemd's watchdog checks). What only one kind has comes with it, so that no part asks the backend's type
    /// at run time (a dynamic cast from the protocol costs the Swift runtime a lookup before `READY=1`): the
    /// simulated board for the control socket's `press` and `level`, the GPIO thread's beats for the watchdog.
    static func board(
        config: AgentConfig, systemd: SystemdNotifier
    ) throws -> (backend: any GPIOBackend, simulated: SimulatedBackend?, beats: (@Sendable () -> UInt64)?) {
        switch config.board.backend {
        case .simulated:
            let simulated = SimulatedBackend(board: config.board)
            return (simulated, simulated, nil)
        case .gpiod:
            let gpiod = try GpiodBackend(
                board: config.board, heartbeat: SystemdNotifications.gpioHeartbeat(systemd))
            return (gpiod, nil, { gpiod.beats })
        }
    }

    /// The pairing part of the configured mode: the companion app's endpoints served in the pairing window,
    /// or code-based linking (no port).
    private static func pairingPart(
        config: AgentConfig, clientId: String, lwa: LWAClient, tokens: TokenManager<Clock>,
        window: PairingWindowKeeper<Clock>,
        linking: CodeLinker<Clock>?, clock: Clock, group: MultiThreadedEventLoopGroup, shown: ShownStatusBook,
        logger: Logger
    ) throws(AgentError) -> any DaemonPart {
        if let linking {
            return TokenFollowingPart(
                service: linking, tokens: tokens.events.subscribe { $0.isPairingChange }, description: "linking")
        }
        guard let listen = config.pairingListen else {
            throw AgentError(.configuration, "pairing.listen: is required when pairing.mode is \"companion\"")
        }
        if config.pairingSetupKey == nil { logger.warning("\(AgentConfig.setupKeyMissingWarning)") }
        let published = PublishedHostName()
        let pairing = PairingCoordinator(
            device: config.device, setupKey: config.pairingSetupKey, clientId: clientId, lwa: lwa,
            tokens: tokens, clock: clock,
            deviceNames: { PairingRequestGuard.deviceNames(listenHost: listen.host, published: published.value) },
            logger: logger)
        let advertiser = PairingAdvertiser(
            advertisement: PairingAdvertisement(
                serial: config.device.serial, model: config.device.model, port: listen.port),
            window: window.changes.subscribe(), shown: shown, publishedHostName: published, logger: logger)
        return PairingServer.Part(
            listen: listen, pairing: pairing, window: window, tokens: tokens.events.subscribe { $0.isPairingChange },
            group: group,
            logger: logger, advertiser: advertiser)
    }

    /// The Wi-Fi setup mode when `wifiSetup` is on (it needs the setup key, which the config's check demands).
    static func wifiSetup(
        config: AgentConfig, clock: Clock, group: MultiThreadedEventLoopGroup, lights: Lights<Clock>,
        shown: ShownStatusBook, logger: Logger, joined: @escaping @Sendable () async -> Void
    ) -> WiFiSetup<Clock>? {
        guard let settings = config.wifiSetup, let key = config.pairingSetupKey else { return nil }
        return WiFiSetup(
            settings: settings, serial: config.device.serial, key: key, clock: clock, group: group, logger: logger,
            show: { state in
                await shown.recordWiFiSetup(state?.description)
                await lights.update { $0.wifiSetupOpen = state?.isOpen ?? false }
            }, joined: joined)
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
    static func runGroup(_ services: [any DaemonPart], logger: Logger) async throws {
        let owned = TerminationSignals.areOwned
        var configuration = ServiceGroupConfiguration(
            services: services.map(\.groupConfiguration),
            gracefulShutdownSignals: owned ? [] : [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = .seconds(10)
        let group = ServiceGroup(configuration: configuration)
        guard owned else { return try await group.run() }
        let listener = TerminationSignals.listen { signal in
            logger.info("signal \(signal.number) received: stopping gracefully")
            StopBound.daemon.begin()
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
