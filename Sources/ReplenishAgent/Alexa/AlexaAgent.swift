import Logging
import NIOPosix

/// The daemon of program alexa (docs/programs.md): the board's presses and levels become reports to the maker's
/// cloud (`SupplyReporter`), which reports them to Alexa as inventory sensors. No Amazon token is on the unit,
/// and it opens no pairing port: the customer's phone claims the unit in the maker's cloud with the label's key.
/// What it shares with the drs daemon: the state directory's lock, the board and its input pipeline, the LED,
/// the control socket, the shown status, systemd's notifications and the Wi-Fi setup.
struct AlexaAgent {
    typealias Clock = ContinuousClock

    let config: AgentConfig
    let settings: AgentConfig.AlexaSettings
    let logger: Logger

    func run() async throws {
        // The start's own reads and writes run here, before the loop serves; the context ends with the assembly.
        let lane = DiskLane.Context.beforeServing()
        let stateDirectory = try StateDirectory.open(config.stateDirectory, on: lane) { [logger] in
            logger.warning("\($0)")
        }
        defer { withExtendedLifetime(stateDirectory) {} }
        let (config, logger, clock) = (config, logger, ContinuousClock())
        let sensors = Self.sensors(config)
        let reporter = try SupplyReporter(
            unit: settings.unitId, sensors: sensors, store: .reports(stateDirectory: config.stateDirectory),
            cloud: CloudClient(http: try CloudClient.lane(config: config, settings: settings), settings: settings),
            clock: clock, wallTime: { WallClock.isTrusted() ? POSIX.wallTime() : nil }, logger: logger,
            onCorrupt: { logger.error("\($0)") }, loadingOn: lane)
        let shown = ShownStatusBook(runtimeDirectory: config.runtimeDirectory, run: stateDirectory.run, logger: logger)
        _ = StartUp<Clock>.thisBoot(runtimeDirectory: config.runtimeDirectory, logger: logger, on: lane)
        // Every state file is loaded: from here on, blocking file work runs on a lane.
        _ = consume lane

        let group = MultiThreadedEventLoopGroup.singleton
        let systemd = SystemdNotifier.fromProcess()
        let board = try Agent.board(config: config, systemd: systemd)
        let lights = Lights(
            backend: board.backend, output: config.board.outputs.first?.name, clock: clock, logger: logger)
        let signals = Broadcast<PressMeaning.Signal>()
        let wifiSetup = Agent.wifiSetup(
            config: config, clock: clock, group: group, lights: lights, shown: shown, logger: logger,
            joined: { await reporter.checkClaimSoon() })
        let presses = AlexaPresses(
            config: config, reporter: reporter, signals: signals, wifiSetup: wifiSetup, logger: logger)
        let waiters = PressWaiters()
        let inputs = InputPipeline(
            board: config.board, clock: clock, logger: logger, requests: waiters, handler: presses.handle)
        let control = ControlServer(
            backend: board.simulated, inputs: inputs, waiters: waiters, lights: lights, board: config.board,
            owner: { command in await presses.owner(command) })

        let shownReports = reporter.shown.subscribe()
        let lightReports = reporter.shown.subscribe()
        var services: [any DaemonPart] = [
            AlexaLightsPart(lights: lights, reports: lightReports, presses: signals.subscribe()),
            ReportShownPart(shown: shown, reports: shownReports),
            LoopPart(service: reporter, description: "reports"),
            InputPipeline.Part(inputs: inputs, backend: board.backend),
            ControlServer.Part(
                control: control, path: Agent.controlSocketPath(stateDirectory: config.stateDirectory), group: group,
                disk: .shared, logger: logger),
        ]
        for scale in settings.scales {
            services.append(
                LoopPart(
                    service: ScaleReader(scale: scale, reporter: reporter, clock: clock, disk: .shared, logger: logger),
                    description: "scale \(scale.slot)"))
        }
        if let wifiSetup { services.append(WiFiSetup<Clock>.Part(setup: wifiSetup)) }
        if systemd.isEnabled {
            var probes = [
                HealthProbe(name: "event loop") { (try? await group.next().submit {}.get()) != nil },
                HealthProbe(name: "reports") {
                    _ = await reporter.current
                    return true
                },
            ]
            if let beats = board.beats, systemd.watchdogInterval != nil {
                let heartbeat = HeartbeatProbe(beats: beats)
                probes.append(HealthProbe(name: "GPIO thread") { heartbeat.check() })
            }
            services.append(
                ReportStatusKeeper.Part(
                    status: ReportStatusKeeper(notifier: systemd, shown: await reporter.current),
                    reports: reporter.shown.subscribe(), notifier: systemd, probes: probes, logger: logger))
        }
        let current = await reporter.current
        await lights.update { AlexaLightsPart.apply(current, to: &$0) }
        await shown.recordReports(ReportStatusKeeper.line(current))
        logger.notice(
            "replenish-agent started: program alexa, reporting to the maker's cloud",
            metadata: [
                "alexa.unit": "\(settings.unitId)", "alexa.slots": "\(sensors.keys.sorted().joined(separator: ","))",
            ])
        let result = await Result { try await Agent.runGroup(services, logger: logger) }
        await lights.stop()
        board.backend.shutdown()
        logger.info("replenish-agent stopped")
        try result.get()
    }

    /// Each slot's sensor, from the inputs mapped to it and the scales.
    static func sensors(_ config: AgentConfig) -> [String: AgentConfig.SupplySensor] {
        var sensors: [String: AgentConfig.SupplySensor] = [:]
        for button in config.buttons {
            if let sensor = button.sensor { sensors[button.slot] = sensor }
        }
        for scale in config.alexa?.scales ?? [] {
            sensors[scale.slot] = .init(
                kind: .reading(measurement: scale.measurement), dashReplenishmentId: scale.dashReplenishmentId)
        }
        return sensors
    }
}

/// What a recognised press or level means in program alexa: a button's press is its slot's usage, a level
/// input's low or full is its slot's level, a long press opens the Wi-Fi setup (no network) or asks the cloud
/// about the claim. Every answer goes back to whoever caused it (the control socket's `press` and `level`).
struct AlexaPresses: Sendable {
    let config: AgentConfig
    let reporter: SupplyReporter<ContinuousClock>
    let signals: Broadcast<PressMeaning.Signal>
    let wifiSetup: WiFiSetup<ContinuousClock>?
    let logger: Logger

    func handle(_ press: ButtonPress) async -> Result<String, AgentError> {
        guard let slot = config.slot(forInput: press.input) else {
            return .failure(AgentError(.invalidInput, "input \(press.input) reports no slot"))
        }
        do throws(AgentError) {
            switch press.kind {
            case .short:
                let answer = try await reporter.recordUsage(slot: slot)
                signals.publish(.acknowledged)
                return .success(answer)
            case .low, .refilled:
                return .success(try await reporter.recordLevel(slot: slot, low: press.kind == .low))
            case .long:
                if let answer = await wifiSetup?.longPress() {
                    logger.notice("long press: \(answer)")
                    return .success(answer)
                }
                await reporter.checkClaimSoon()
                return .success("asking the maker's cloud whether a customer has claimed the unit")
            }
        } catch {
            logger.warning("press not recorded", metadata: ["alexa.slot": "\(slot)", "error": "\(error.message)"])
            return .failure(error)
        }
    }

    /// The owner's commands: DRS's have no meaning here.
    func owner(_ command: ControlServer.OwnerCommand) async -> Result<String, AgentError> {
        let name =
            switch command {
            case .reset: "reset"
            case .deregister: "deregister"
            case .cancelTestOrders: "cancel-test-orders"
            }
        return .failure(
            AgentError(
                .invalidInput,
                "\(name) belongs to program \"drs\"; in program \"alexa\" the customer removes the unit in the maker's app (docs/programs.md)"
            ))
    }
}

/// The LED in program alexa: claimed or not, reports waiting or failing, the presses' acknowledgement.
struct AlexaLightsPart: DaemonPart {
    let lights: Lights<ContinuousClock>
    let reports: AsyncStream<SupplyReporter<ContinuousClock>.Shown>
    let presses: AsyncStream<PressMeaning.Signal>
    var description: String { "lights" }

    static func apply(_ shown: SupplyReporter<ContinuousClock>.Shown, to facts: inout LEDPattern.Facts) {
        facts.paired = shown.claimed == true
        facts.pendingOrders = shown.unreported ? 1 : 0
        facts.lastAttemptFailedForNetwork = shown.lastError != nil
    }

    func follow() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await shown in reports { await lights.update { Self.apply(shown, to: &$0) } }
            }
            group.addTask {
                for await signal in presses where signal == .acknowledged { await lights.acknowledge() }
            }
        }
    }

    func work() async { await lights.run() }
}

/// `status` in program alexa: the reports' line in the shown status.
struct ReportShownPart: DaemonPart {
    let shown: ShownStatusBook
    let reports: AsyncStream<SupplyReporter<ContinuousClock>.Shown>
    var description: String { "shown status" }

    func work() async {
        for await report in reports { await shown.recordReports(ReportStatusKeeper.line(report)) }
    }
}

/// The `STATUS=` line of program alexa: the claim and the reports.
final actor ReportStatusKeeper: StatusLineKeeper {
    private let notifier: SystemdNotifier
    private var text: String
    private var running = false

    init(notifier: SystemdNotifier, shown: SupplyReporter<ContinuousClock>.Shown) {
        self.notifier = notifier
        text = Self.line(shown)
    }

    static func line(_ shown: SupplyReporter<ContinuousClock>.Shown) -> String {
        let claim =
            switch shown.claimed {
            case true?: "claimed"
            case false?: "not claimed yet: the customer's app claims it with the label"
            case nil: "claim not known yet"
            }
        let reports = shown.unreported ? "reports waiting" : "every report acknowledged"
        return "alexa: \(claim); \(reports)\(shown.lastError.map { "; last error: \($0)" } ?? "")"
    }

    func update(_ shown: SupplyReporter<ContinuousClock>.Shown) {
        let next = Self.line(shown)
        guard next != text else { return }
        text = next
        if running { notifier.status(text) }
    }

    func ready() -> String? {
        running = true
        return notifier.ready(status: text)
    }

    func stopping() -> String? {
        running = false
        return notifier.stopping(status: "stopping")
    }

    struct Part: DaemonPart {
        let status: ReportStatusKeeper
        let reports: AsyncStream<SupplyReporter<ContinuousClock>.Shown>
        let notifier: SystemdNotifier
        let probes: [HealthProbe]
        let logger: Logger
        var description: String { "systemd" }

        func follow() async {
            for await shown in reports { await status.update(shown) }
        }

        func work() async {
            await SystemdNotifications.runNotifications(
                notifier: notifier, status: status, probes: probes, logger: logger)
        }
    }
}
