import FoundationEssentials

/// What `status` shows: what the device knows, read from the state directory (whether or not the agent runs), and
/// whether an agent runs. Never holds a token.
struct StatusReport: Encodable {
    struct Slot: Encodable {
        /// Always present, `null` when unknown (docs/commands.md); the other optionals are left out when absent.
        @NullWhenAbsent var subscribed: Bool?
        @NullWhenAbsent var lastResult: String?
        var lastResultAt: String?
        var pending: Bool
        var parkedReason: String?
        /// What a pending order waits for before it is sent again, when something other than its backoff
        /// holds it (a wall clock known synchronised, after a restart with an unanswered call).
        var waitingFor: String? = nil
        /// What the slot is subscribed to (`subscriptionInfo` @2.0), when DRS said.
        var products: [SubscriptionInfo.Product]? = nil
        /// The slot's last placed order: DRS's id, whether it is still followed, its state as DRS said.
        var order: Order? = nil

        /// `status` and `checkedAt` are always present, `null` until DRS was asked (docs/commands.md).
        struct Order: Encodable {
            var eventInstanceId: String
            var open: Bool
            @NullWhenAbsent var status: String?
            @NullWhenAbsent var checkedAt: String?
        }
    }

    /// Whether the pairing endpoints are served, and until when.
    struct PairingWindow: Encodable {
        var open: Bool
        @NullWhenAbsent var closesAt: String?
    }

    /// Code-based linking: the code the customer can enter now, where, and until when. Absent otherwise.
    struct Linking: Encodable, Equatable {
        var userCode: String
        var verificationURI: String
        var expiresAt: String
    }

    /// Program alexa: what `reports.json` holds and what the running agent says of the cloud.
    struct Alexa: Encodable {
        var unit: String
        /// Whether a customer has claimed the unit, as the cloud last said; `null` until it said.
        @NullWhenAbsent var claimed: Bool?
        /// The report sent and not yet acknowledged, by its sequence number.
        @NullWhenAbsent var reportInFlight: Int?
        /// Units used per slot since the report in flight was made.
        var usageNotYetReported: [String: Double]
        /// Each level slot's latest reading.
        var levels: [String: Double]
        @NullWhenAbsent var lastDailyReportAt: String?
        /// The running agent's line: the claim, the reports, the last error with the cloud.
        @NullWhenAbsent var cloud: String?
    }

    /// `drs` or `alexa` (`program`).
    var program: String = "drs"
    var alexa: Alexa? = nil
    var serial: String
    /// Where the serial came from: `config`, `file` (`device.serialFile`) or `device-tree`; and the file.
    var serialSource: String = "config"
    var serialFile: String? = nil
    var phase: String
    /// Whether an agent runs on this state directory: a live process holds its lock.
    var running: Bool
    /// The running agent's pid as its lock file records it; `null` when none runs (or it is unreadable).
    @NullWhenAbsent var pid: Int?
    var paired: Bool
    var pairingState: String
    /// `companion` or `code` (`pairing.mode`).
    var pairingMode: String
    var pairingWindow: PairingWindow
    var linking: Linking?
    /// While the pairing window is open: whether the pairing port is advertised by DNS-SD, or why not.
    var dnsSD: String?
    /// With `wifiSetup` on: the setup mode (dormant, waiting, the access point open and the join, unavailable
    /// and why); absent when it is off.
    var wifiSetup: String?
    /// unpaired, fresh, refreshing, retry-wait or needs-pairing.
    var tokenState: TokenState.Kind
    var tokenStateReason: String?
    var accessTokenExpiresAt: String?
    var accessTokenExpiresInSeconds: Int?
    var pendingOrders: Int
    var parkedOrders: Int
    var lastDeviceStatusAt: String?
    var slots: [String: Slot]
    var problems: [String]
}

extension StatusReport {
    /// `runningAgent`: the pid of the agent holding the state directory's lock (0 when its pid is unreadable), nil
    /// when none runs (`StateDirectory.runningAgent`).
    /// `agentRun`: its run id (`StateDirectory.runningAgentRun`), which its "sent, answer unknown" marks carry.
    init(config: AgentConfig, now: Double, runningAgent: Int32? = nil, agentRun: String? = nil) {
        var problems: [String] = []
        var tokens: TokenSet?
        do {
            tokens = try FileTokenStore.peek(
                stateDirectory: config.stateDirectory, on: DiskLane.Context.beforeServing())
        } catch {
            problems.append(error.message)
        }
        let outbox = Self.readOutbox(config: config, &problems)
        let record =
            (try? Self.readState(
                StateStore<SubscriptionRecord>.subscriptionRecord(stateDirectory: config.stateDirectory), &problems))
            ?? SubscriptionRecord()
        // What the daemon shows while it runs (and its last word, until the next boot empties the runtime
        // directory). A file that cannot be used is the daemon's to replace: it shows nothing here; nor does a
        // stopped run's file while a new run, which has not written yet, holds the lock.
        var shown = ShownStatus()
        if case .read(let value)? = try? StateStore<ShownStatus>.shownStatus(runtimeDirectory: config.runtimeDirectory)
            .read(on: DiskLane.Context.beforeServing(), owner: StateDirectory.agentUID(config.runtimeDirectory)),
            runningAgent == nil || value.run == agentRun
        {
            shown = value
        }
        var slots: [String: Slot] = [:]
        // The running agent's marks are of this boot; the boot's mark says which others are.
        let run = AgentRun(
            boot: BootIdentity.current(
                runtimeDirectory: config.runtimeDirectory, create: false, on: DiskLane.Context.beforeServing()),
            id: agentRun)
        let synchronized = WallClock.isSynchronized()
        for slot in config.slots {
            let subscription = record.slots[slot]
            let known = outbox.slots[slot]
            let entry = outbox.entry(for: slot)
            let waitsForClock = entry.map { Outbox.waitsForClock($0, run: run, clockSynchronized: synchronized) }
            slots[slot] = Slot(
                subscribed: subscription?.subscribed, lastResult: entry?.parkedReason ?? known?.lastResult,
                lastResultAt: known?.lastResultAt.map(ISO8601.format), pending: entry.map { !$0.isParked } ?? false,
                parkedReason: entry?.parkedReason,
                waitingFor: waitsForClock == true ? Outbox.waitingForClockReason : nil,
                products: subscription?.products,
                order: known?.lastEventInstanceId.map { id in
                    .init(
                        eventInstanceId: id, open: known?.orderOpen ?? false, status: known?.orderStatus,
                        checkedAt: known?.orderCheckedAt.map(ISO8601.format))
                })
        }
        // The token file decides whether the device is paired; the recorded state says more only when it agrees.
        let tokenState: TokenState.Kind
        if tokens != nil {
            tokenState = shown.tokenState.flatMap { $0.isPaired ? $0 : nil } ?? .fresh
        } else {
            tokenState = shown.tokenState == .needsPairing ? .needsPairing : .unpaired
        }
        // The agent writes when an open window closes; a time already past (or a paired device) is closed, and so is
        // the window of an agent that no longer runs (its port closed with it; the next start opens it again).
        let windowClosesAt = shown.pairingWindowClosesAt.flatMap {
            runningAgent != nil && tokens == nil && $0 > now ? $0 : nil
        }
        // A code is shown while the device is unpaired in code mode and the code has not expired; the agent removes
        // it once paired or expired, and a stopped agent's code is shown only until its expiry.
        let linking = shown.linking.flatMap { code in
            config.pairingMode == .code && tokens == nil && code.expiresAt > now ? code : nil
        }
        let windowState =
            switch config.pairingMode {
            case .code:
                linking.map {
                    "code-based linking: enter code \($0.userCode) at \($0.verificationURI) before \(ISO8601.format($0.expiresAt))"
                } ?? "code-based linking: no code to enter yet (the running agent asks LWA for one)"
            case .companion:
                // The window opens at every start of an unpaired device: with no agent running, that is next.
                windowClosesAt != nil
                    ? "pairing mode"
                    : runningAgent == nil
                        ? "pairing window: opens when the agent starts"
                        : "pairing window closed (a long press opens it)"
            }
        let pairingState =
            switch tokenState {
            case .needsPairing:
                "needs pairing again (\(shown.tokenStateReason ?? "LWA refused the refresh token")); \(windowState)"
            case .unpaired: "not paired; \(windowState)"
            case .fresh, .refreshing, .retryWait: "paired"
            }
        var alexa: Alexa?
        if let settings = config.alexa {
            let reports =
                (try? Self.readState(StateStore<ReportRecord>.reports(stateDirectory: config.stateDirectory), &problems))
                ?? nil
            alexa = Alexa(
                unit: settings.unitId, claimed: reports?.claimed, reportInFlight: reports?.inFlight?.sequence,
                usageNotYetReported: reports?.usage ?? [:], levels: (reports?.levels ?? [:]).mapValues(\.value),
                lastDailyReportAt: reports?.lastDailyAt.map(ISO8601.format),
                cloud: runningAgent == nil ? "the agent is not running" : shown.reports)
        }
        self.init(
            program: config.program.rawValue, alexa: alexa,
            serial: config.device.serial, serialSource: config.device.serialSource.name,
            serialFile: config.device.serialSource.file, phase: config.device.phase.rawValue,
            running: runningAgent != nil, pid: runningAgent.flatMap { $0 > 0 ? Int($0) : nil }, paired: tokens != nil,
            pairingState: pairingState, pairingMode: config.pairingMode.rawValue,
            pairingWindow: .init(open: windowClosesAt != nil, closesAt: windowClosesAt.map(ISO8601.format)),
            linking: linking.map {
                Linking(
                    userCode: $0.userCode, verificationURI: $0.verificationURI, expiresAt: ISO8601.format($0.expiresAt))
            },
            dnsSD: windowClosesAt != nil ? shown.advertisement : nil,
            wifiSetup: config.wifiSetup == nil
                ? nil
                : runningAgent == nil
                    ? "the agent is not running" : shown.wifiSetup ?? "dormant (the unit has a network)",
            tokenState: tokenState,
            tokenStateReason: tokens != nil || tokenState == .needsPairing ? shown.tokenStateReason : nil,
            accessTokenExpiresAt: tokens.map { ISO8601.format($0.accessTokenExpiresAt) },
            accessTokenExpiresInSeconds: tokens.map { Int(($0.accessTokenExpiresAt - now).rounded()) },
            pendingOrders: outbox.pending.count, parkedOrders: outbox.parked.count,
            lastDeviceStatusAt: record.lastDeviceStatusAt.map(ISO8601.format), slots: slots, problems: problems)
    }

    /// A state file as the commands read it: nil when it is missing, or unusable (then a line in `problems`).
    /// The outbox as a command shows it (`status`, `orders`), with the orders of an earlier build's files that no
    /// agent of this one has started on yet; an unusable file is a problem, and an empty outbox.
    static func readOutbox(config: AgentConfig, _ problems: inout [String]) -> Outbox {
        var outbox =
            (try? readState(StateStore<Outbox>.outbox(stateDirectory: config.stateDirectory), &problems)) ?? Outbox()
        outbox.adoptLegacyOrders(
            stateDirectory: config.stateDirectory, owner: StateDirectory.agentUID(config.stateDirectory),
            on: DiskLane.Context.beforeServing())
        return outbox
    }

    static func readState<T: StateFormat>(_ store: StateStore<T>, _ problems: inout [String]) throws -> T? {
        switch try store.read(
            on: DiskLane.Context.beforeServing(), owner: StateDirectory.agentUID(POSIX.parentDirectory(of: store.path)))
        {
        case .missing: return nil
        case .read(let value): return value
        case .unusable(let reason):
            problems.append("\(store.path) \(reason) (the agent will move it aside at its next start)")
            return nil
        }
    }
}
