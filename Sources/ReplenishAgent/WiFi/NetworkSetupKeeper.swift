import Logging

/// Runs `NetworkSetup` against NetworkManager on the agent's clock: NetworkManager's changes, the long press, the
/// phone's credentials and the machine's timer go in; the actions come out as NetworkManager calls. The setup
/// endpoints (`ProvisioningEndpoints`) ask it for the networks, hand it the credentials and read the join's state.
final actor NetworkSetupKeeper<C: Clock> where C.Duration == Duration {
    typealias Machine = NetworkSetup<C.Instant>

    private var machine: Machine
    private let control: any NetworkManagerControl
    private let accessPoint: SetupAccessPoint
    private let clock: C
    private let logger: Logger
    private var timer: Task<Void, Never>?
    private var input: AsyncStream<Machine.Event>.Continuation?
    /// The machine's actions not yet run.
    private var pendingActions: [Machine.Action] = []
    /// The networks of the last scan (their channels), and the access point's channel.
    private var seen: [VisibleNetwork] = []
    private var accessPointChannel = 0
    /// The access point and the join share one interface: NetworkManager took the access point down for the join,
    /// so a failed join opens it again for the phone's next try.
    private let reopenAfterFailedJoin: Bool
    /// Told each new phase (the LED, `status`, the setup endpoints' server).
    private let observe: @Sendable (Machine.Phase) -> Void

    init(
        control: any NetworkManagerControl, accessPoint: SetupAccessPoint, timing: Machine.Timing = .init(),
        clock: C, logger: Logger, reopenAfterFailedJoin: Bool = false,
        observe: @escaping @Sendable (Machine.Phase) -> Void = { _ in }
    ) {
        self.reopenAfterFailedJoin = reopenAfterFailedJoin
        self.observe = observe
        self.control = control
        self.accessPoint = accessPoint
        self.clock = clock
        self.logger = logger
        machine = Machine(timing: timing, now: clock.now)
    }

    /// The machine's phase (status, tests).
    var phase: Machine.Phase { machine.phase }
    var isOpen: Bool { machine.isOpen }

    /// Until cancelled: NetworkManager's changes and the timer into the machine, its actions out. `longPress`: a
    /// long press woke the setup, handled once NetworkManager has answered.
    func run(longPress: Bool = false) async {
        let (events, continuation) = AsyncStream.makeStream(of: Machine.Event.self)
        input = continuation
        do {
            let start = try await control.start()
            handle(.started(online: start.online, savedWiFi: start.savedWiFi))
            if longPress { handle(.longPress) }
        } catch {
            handle(.networkManagerGone(reason: "\(error)"))
        }
        await performPending()
        await withDiscardingTaskGroup { group in
            let changes = control.changes()
            group.addTask {
                for await change in changes { continuation.yield(Self.event(change)) }
            }
            for await event in events {
                handle(event)
                await performPending()
            }
            group.cancelAll()
        }
        timer?.cancel()
        if machine.isOpen { await control.closeAccessPoint() }
    }

    /// A long press: true when setup took it (no connectivity), false when it is not setup's.
    func longPress() async -> Bool {
        let outcome = handle(.longPress)
        await performPending()
        return outcome != .notMine
    }

    /// The phone's proven credentials: nil when a join started, else why not.
    func join(ssid: String, passphrase: String?, hidden: Bool) async -> String? {
        let outcome = handle(.credentials(ssid: ssid))
        if case .refused(let reason) = outcome { return reason }
        await followToChannel(of: ssid)
        do {
            logger.info("setup mode: joining the network the phone sent", metadata: ["wifi.ssid": "\(ssid)"])
            try await control.join(ssid: ssid, passphrase: passphrase, hidden: hidden)
        } catch {
            handle(.joinFailed(.notFound))
        }
        await performPending()
        return nil
    }

    /// The join's state as the phone reads it; reading `joined` lets the access point close a few seconds later
    /// (`Timing.afterRead`), once this answer is out.
    func readJoin() async -> Machine.JoinState? {
        guard case .setup(_, let join) = machine.phase else { return nil }
        if case .joined = join {
            handle(.joinedRead)
            await performPending()
        }
        return join
    }

    /// The networks NetworkManager sees.
    func networks() async throws -> [VisibleNetwork] {
        seen = try await control.networks()
        return seen
    }

    /// A radio holds one channel at a time: the access point opens on the channel of the strongest network seen
    /// (most likely the home's), and moves to the chosen network's before the join (the phone, which saved the
    /// access point, joins it again there).
    private func followToChannel(of ssid: String) async {
        guard machine.isOpen, let channel = seen.first(where: { $0.ssid == ssid })?.channel, channel != 0,
            channel != accessPointChannel
        else { return }
        logger.info(
            "setup mode: moving the access point to the network's channel",
            metadata: ["wifi.channel": "\(channel)", "wifi.accessPointChannel": "\(accessPointChannel)"])
        do {
            try await control.openAccessPoint(
                ssid: accessPoint.ssid, passphrase: accessPoint.passphrase.value, channel: channel)
            accessPointChannel = channel
        } catch {
            logger.warning("setup mode: could not move the access point", metadata: ["error": "\(error)"])
        }
    }

    @discardableResult
    private func handle(_ event: Machine.Event) -> Machine.Outcome {
        let before = machine.phase
        let outcome = machine.handle(event, at: clock.now)
        if case .actions(let actions) = outcome { pendingActions += actions }
        if reopenAfterFailedJoin, case .joinFailed = event, case .setup(_, .failed?) = machine.phase {
            pendingActions.append(.openAccessPoint)
        }
        if machine.phase != before {
            log(from: before)
            observe(machine.phase)
        }
        schedule()
        return outcome
    }

    /// Runs the pending actions, and those the machine adds meanwhile (a failed open closes setup).
    private func performPending() async {
        while !pendingActions.isEmpty {
            let actions = pendingActions
            pendingActions.removeAll()
            for action in actions { await perform(action) }
        }
    }

    private func perform(_ action: Machine.Action) async {
        do {
            switch action {
            case .openAccessPoint:
                if seen.isEmpty { seen = (try? await control.networks()) ?? [] }
                let channel = seen.first { $0.channel != 0 }?.channel ?? 0
                try await control.openAccessPoint(
                    ssid: accessPoint.ssid, passphrase: accessPoint.passphrase.value, channel: channel)
                accessPointChannel = channel
            case .closeAccessPoint: await control.closeAccessPoint()
            case .cancelJoin: await control.cancelJoin()
            case .reconnectSaved: await reconnectSaved()
            // Started by `join`, which holds the credentials; the machine names it only to say it is due.
            case .join: break
            }
        } catch {
            handle(.networkManagerGone(reason: "could not open the setup access point: \(error)"))
        }
    }

    /// NetworkManager's autoconnect may have given up on the saved network (a handshake that timed out is taken
    /// for a wrong key): an explicit join brings it back. A refusal is logged and tried again at the next turn.
    private func reconnectSaved() async {
        do {
            if try await control.reconnectSaved() {
                logger.info("Wi-Fi: asked NetworkManager to join the saved network again")
            }
        } catch {
            logger.warning(
                "Wi-Fi: NetworkManager did not join the saved network again", metadata: ["error": "\(error)"])
        }
    }

    private func schedule() {
        timer?.cancel()
        timer = nil
        guard let deadline = machine.deadline, let input else { return }
        let clock = clock
        timer = Task {
            do { try await clock.loopSleep(until: deadline) } catch { return }
            input.yield(.tick)
        }
    }

    private func log(from before: Machine.Phase) {
        switch machine.phase {
        case .setup(_, nil) where !Self.isSetup(before):
            logger.notice("setup mode: access point open", metadata: ["wifi.accessPoint": "\(accessPoint.ssid)"])
        case .setup(_, .failed(let ssid, let reason)):
            logger.warning(
                "setup mode: could not join the network",
                metadata: ["wifi.ssid": "\(ssid)", "wifi.error": "\(reason.rawValue)"])
        case .setup(_, .joined(let ssid, _)):
            logger.notice("setup mode: joined the network", metadata: ["wifi.ssid": "\(ssid)"])
        case .online where Self.isSetup(before), .offline where Self.isSetup(before):
            logger.notice("setup mode: access point closed")
        case .unavailable(let reason):
            logger.warning("setup mode unavailable", metadata: ["wifi.reason": "\(reason)"])
        default: break
        }
    }

    private static func isSetup(_ phase: Machine.Phase) -> Bool { if case .setup = phase { true } else { false } }

    private static func event(_ change: NetworkManagerChange) -> Machine.Event {
        switch change {
        case .connectivity(let online): .connectivity(online: online)
        case .savedWiFi(let saved): .savedWiFi(saved)
        case .joinSucceeded: .joinSucceeded
        case .joinFailed(let reason): .joinFailed(reason)
        case .gone(let reason): .networkManagerGone(reason: reason)
        }
    }
}
