/// When the unit opens its setup access point, joins the network the phone hands it, and closes the access point
/// again (docs/wifi-setup.md, "Setup mode"). A pure value: each event (what NetworkManager said, a long press, the
/// phone's credentials, a join's end, the time) returns the actions to run, and `deadline` says when the next
/// `tick` is due. The agent runs the actions against NetworkManager; tests drive it on a manual clock.
///
/// The rules:
/// - A unit with **no saved Wi-Fi connection** and no connectivity opens the access point after `firstWait`
///   (30 s: time for a cable or a slow DHCP at boot).
/// - A unit **with a saved connection** opens it only after `outageWait` (5 min) without connectivity: a
///   router that restarts, or a home network down for a minute, never puts it into setup mode. It opens by itself
///   once per outage; a long press opens it again.
/// - While it waits **with a saved connection** and no connectivity (before the access point opens, and after it
///   closed unused), it asks NetworkManager every `reconnectEvery` (30 s) to join the saved network again. An
///   explicit join also brings back a network NetworkManager's own autoconnect has given up on: a 4-way handshake
///   that timed out under load is taken for a wrong key, and with no secret agent to ask NetworkManager blocks the
///   connection until something asks for it.
/// - A **long press** on a unit without connectivity opens it at once; in setup mode a long press closes it.
///   On a unit with connectivity a long press is not setup's (`handle` returns `.notMine`: re-pairing keeps it).
/// - Credentials start a join while the access point **stays up**, so the phone reads the result: `joined` once
///   NetworkManager reports connectivity on the new network, or why it failed (wrong passphrase, network not
///   found, no DHCP answer, dropped, timed out after `joinTimeout`). A failed join leaves setup mode open for
///   another try, its timer started again.
/// - The access point closes `afterJoined` (30 s) after a join succeeded, or `afterRead` (5 s) after the phone
///   read `joined` (so that the answer carrying it reaches the phone before the access point goes); after `openFor` (15 min, `wifiSetup.openMinutes`) with no join under way; when connectivity comes
///   back on its own; on a long press.
struct NetworkSetup<Instant: InstantProtocol>: Sendable, Equatable where Instant.Duration == Duration {
    struct Timing: Sendable, Equatable {
        var firstWait: Duration = .seconds(30)
        var outageWait: Duration = .seconds(300)
        var openFor: Duration = .seconds(900)
        var joinTimeout: Duration = .seconds(90)
        var afterJoined: Duration = .seconds(30)
        var afterRead: Duration = .seconds(5)
        var reconnectEvery: Duration = .seconds(30)
    }

    typealias JoinFailure = NetworkSetupJoinFailure

    /// What the phone reads back.
    enum JoinState: Sendable, Equatable {
        case joining(ssid: String, since: Instant)
        case joined(ssid: String, at: Instant)
        case failed(ssid: String, JoinFailure)

        /// `joining`, `joined` or `failed:<reason>`.
        var name: String {
            switch self {
            case .joining: "joining"
            case .joined: "joined"
            case .failed(_, let reason): "failed:\(reason.rawValue)"
            }
        }
    }

    enum Phase: Sendable, Equatable {
        /// NetworkManager reports connectivity.
        case online
        /// No connectivity since `since`; `opened` once setup mode opened by itself in this outage.
        case offline(since: Instant, openedThisOutage: Bool)
        /// The access point is up since `since` (the timer's start); `join` the phone's last join.
        case setup(since: Instant, join: JoinState?)
        /// No NetworkManager (or no Wi-Fi device): the agent runs as before, `status` says why.
        case unavailable(reason: String)
    }

    enum Event: Sendable, Equatable {
        /// NetworkManager's answer at start: connectivity, and whether a Wi-Fi connection is saved.
        case started(online: Bool, savedWiFi: Bool)
        case connectivity(online: Bool)
        /// A Wi-Fi connection was saved or deleted (the phone's join saves one).
        case savedWiFi(Bool)
        case longPress
        /// The phone's proven credentials (`POST /provision/network`).
        case credentials(ssid: String)
        case joinSucceeded
        case joinFailed(JoinFailure)
        /// The phone read `joined` (`GET /provision/network`).
        case joinedRead
        case networkManagerGone(reason: String)
        case tick
    }

    enum Action: Sendable, Equatable {
        case openAccessPoint
        case closeAccessPoint
        /// Join the network (NetworkManager keeps the credentials in its own root-only connection file).
        case join(ssid: String)
        /// Stop a join under way (setup closed during it).
        case cancelJoin
        /// Ask NetworkManager to join the saved network again (it may have stopped trying on its own).
        case reconnectSaved
    }

    /// What `handle` did with an event.
    enum Outcome: Sendable, Equatable {
        case actions([Action])
        /// A long press on a unit with connectivity: not setup's.
        case notMine
        /// Credentials while setup mode is closed, or while a join is under way: refused, nothing changes.
        case refused(String)
    }

    private(set) var phase: Phase
    private(set) var savedWiFi = false
    /// When the next `reconnectSaved` is due: set only while offline with a saved connection.
    private(set) var nextReconnect: Instant?
    /// When the phone first read `joined` in this join, if it did.
    private(set) var joinedReadAt: Instant?
    let timing: Timing

    init(timing: Timing = .init(), now: Instant) {
        self.timing = timing
        phase = .offline(since: now, openedThisOutage: false)
    }

    /// Whether the access point is up.
    var isOpen: Bool { if case .setup = phase { true } else { false } }

    /// When the next `tick` is due, or nil when no timer runs.
    var deadline: Instant? {
        switch phase {
        case .online, .unavailable: return nil
        case .offline:
            guard let opening = openingDeadline else { return nextReconnect }
            return nextReconnect.map { min($0, opening) } ?? opening
        case .setup(let since, let join):
            switch join {
            case .joining(_, let started): return started.advanced(by: timing.joinTimeout)
            case .joined(_, let at):
                let unread = at.advanced(by: timing.afterJoined)
                return joinedReadAt.map { min(unread, $0.advanced(by: timing.afterRead)) } ?? unread
            case .failed, nil: return since.advanced(by: timing.openFor)
            }
        }
    }

    /// When the access point opens by itself in this outage, or nil (not offline, or opened once already).
    private var openingDeadline: Instant? {
        guard case .offline(let since, false) = phase else { return nil }
        return since.advanced(by: savedWiFi ? timing.outageWait : timing.firstWait)
    }

    mutating func handle(_ event: Event, at now: Instant) -> Outcome {
        if case .unavailable = phase { return event == .longPress ? .notMine : .actions([]) }
        defer { keepReconnecting(at: now) }
        switch event {
        case .started(let online, let saved):
            savedWiFi = saved
            phase = online ? .online : .offline(since: now, openedThisOutage: false)
            return .actions([])
        case .savedWiFi(let saved):
            savedWiFi = saved
            return .actions([])
        case .networkManagerGone(let reason):
            let wasOpen = isOpen
            phase = .unavailable(reason: reason)
            return .actions(wasOpen ? [.closeAccessPoint] : [])
        case .connectivity(let online):
            return connectivity(online, at: now)
        case .longPress:
            switch phase {
            case .online: return .notMine
            case .offline: return open(at: now)
            case .setup(_, let join): return close(at: now, cancellingJoin: Self.isJoining(join))
            case .unavailable: return .notMine
            }
        case .credentials(let ssid):
            guard case .setup(_, let join) = phase else { return .refused("setup mode is closed") }
            if Self.isJoining(join) { return .refused("a join is under way") }
            phase = .setup(since: now, join: .joining(ssid: ssid, since: now))
            joinedReadAt = nil
            return .actions([.join(ssid: ssid)])
        case .joinSucceeded:
            guard case .setup(let since, .joining(let ssid, _)) = phase else { return .actions([]) }
            phase = .setup(since: since, join: .joined(ssid: ssid, at: now))
            return .actions([])
        case .joinFailed(let reason):
            guard case .setup(_, .joining(let ssid, _)) = phase else { return .actions([]) }
            phase = .setup(since: now, join: .failed(ssid: ssid, reason))
            return .actions([])
        case .joinedRead:
            // The access point closes at the next tick: the answer that carries `joined` is still to go out.
            guard case .setup(_, .joined) = phase, joinedReadAt == nil else { return .actions([]) }
            joinedReadAt = now
            return .actions([])
        case .tick:
            return tick(at: now)
        }
    }

    private mutating func connectivity(_ online: Bool, at now: Instant) -> Outcome {
        switch (phase, online) {
        case (.online, true), (.offline, false), (.setup, false), (.unavailable, _): return .actions([])
        case (.online, false):
            phase = .offline(since: now, openedThisOutage: false)
            return .actions([])
        case (.offline, true):
            phase = .online
            return .actions([])
        case (.setup(_, let join), true):
            switch join {
            // The phone's network came up: the phone reads `joined` before the access point closes.
            case .joining(let ssid, _):
                phase = .setup(since: now, join: .joined(ssid: ssid, at: now))
                return .actions([])
            case .joined: return .actions([])
            // A saved network came back on its own: nothing to set up.
            case .failed, nil:
                phase = .online
                return .actions([.closeAccessPoint])
            }
        }
    }

    /// The reconnect timer runs while offline with a saved connection, from the first moment that holds.
    private mutating func keepReconnecting(at now: Instant) {
        guard case .offline = phase, savedWiFi else {
            nextReconnect = nil
            return
        }
        if nextReconnect == nil { nextReconnect = now.advanced(by: timing.reconnectEvery) }
    }

    private mutating func tick(at now: Instant) -> Outcome {
        guard let deadline, deadline <= now else { return .actions([]) }
        switch phase {
        case .offline:
            if let opening = openingDeadline, opening <= now { return open(at: now) }
            nextReconnect = now.advanced(by: timing.reconnectEvery)
            return .actions([.reconnectSaved])
        case .setup(_, .joining(let ssid, _)):
            phase = .setup(since: now, join: .failed(ssid: ssid, .timedOut))
            return .actions([.cancelJoin])
        case .setup(_, .joined):
            phase = .online
            return .actions([.closeAccessPoint])
        case .setup: return close(at: now, cancellingJoin: false)
        case .online, .unavailable: return .actions([])
        }
    }

    private mutating func open(at now: Instant) -> Outcome {
        phase = .setup(since: now, join: nil)
        return .actions([.openAccessPoint])
    }

    private static func isJoining(_ join: JoinState?) -> Bool {
        if case .joining = join { true } else { false }
    }

    /// Closed with no network: offline again, and not opened by itself again in this outage.
    private mutating func close(at now: Instant, cancellingJoin: Bool) -> Outcome {
        phase = .offline(since: now, openedThisOutage: true)
        return .actions(cancellingJoin ? [.cancelJoin, .closeAccessPoint] : [.closeAccessPoint])
    }
}

/// Why a join failed, as `GET /provision/network` names it.
enum NetworkSetupJoinFailure: String, Sendable, Equatable {
    case wrongPassphrase = "wrong-passphrase"
    case notFound = "network-not-found"
    case noDHCP = "no-dhcp-answer"
    case dropped = "connection-dropped"
    case timedOut = "timed-out"
}
