/// The pairing sessions `deviceInfo` starts, and how often a peer may start one. Pure; times come from
/// the caller's clock.
///
/// Each peer address has at most one session, and a new `deviceInfo` replaces only that peer's session, so
/// the newest session is always valid and a script on another machine calling `deviceInfo` in a loop cannot
/// replace the session of the phone that is pairing. A peer may start a session at most once per
/// `spacing` and `perMinute` times a minute (429 with the time to wait beyond). At most `maximumPeers`
/// sessions are kept (the oldest goes first): only an attacker with that many addresses could push the
/// phone's session out.
struct PairingSessions<Instant: InstantProtocol, Value: Sendable>: Sendable where Instant.Duration == Duration {
    struct Session: Sendable {
        let id: String
        let peer: String
        let createdAt: Instant
        let value: Value
    }

    struct Limits: Sendable {
        var spacing: Duration = .seconds(2)
        var perMinute = 10
        var maximumPeers = 256
        /// Peers whose starts of the last minute are remembered (for `perMinute`); beyond, the peer that
        /// started least recently is forgotten.
        var maximumTrackedPeers = 1024
    }

    let limits: Limits
    private(set) var sessions: [Session] = []
    private var starts: [String: [Instant]] = [:]

    init(limits: Limits = Limits()) { self.limits = limits }

    /// Nil when `peer` may start a session now; otherwise how long it must wait.
    mutating func mayStart(peer: String, at now: Instant) -> Duration? {
        let minuteAgo = now.advanced(by: .seconds(-60))
        starts = starts.compactMapValues { times in
            let recent = times.filter { minuteAgo < $0 }
            return recent.isEmpty ? nil : recent
        }
        let recent = starts[peer] ?? []
        var wait: Duration = .zero
        if let last = recent.last { wait = max(wait, limits.spacing - last.duration(to: now)) }
        if recent.count >= limits.perMinute, let first = recent.first {
            wait = max(wait, .seconds(60) - first.duration(to: now))
        }
        return wait > .zero ? wait : nil
    }

    /// Starts `peer`'s session (call only after `mayStart` said yes), replacing its previous one.
    mutating func start(id: String, peer: String, value: Value, at now: Instant) {
        if starts[peer] == nil, starts.count >= limits.maximumTrackedPeers,
            let stalest = starts.min(by: { ($0.value.last ?? now) < ($1.value.last ?? now) })?.key
        {
            starts[stalest] = nil
        }
        starts[peer, default: []].append(now)
        sessions.removeAll { $0.peer == peer }
        if sessions.count >= limits.maximumPeers { sessions.removeFirst() }
        sessions.append(Session(id: id, peer: peer, createdAt: now, value: value))
    }

    func session(id: String) -> Session? { sessions.first { $0.id == id } }

    /// Forgets every session (paired, or a new window): the rate limits stay.
    mutating func removeAll() { sessions.removeAll() }
}
