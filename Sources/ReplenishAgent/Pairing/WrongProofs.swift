/// How many wrong (or missing) `companionInfo` proofs the pairing endpoints take, and when they are logged.
/// Pure; times come from the caller's clock.
///
/// Each peer address may send `burst` wrong proofs at once, then one more every `refill` (a leaky bucket):
/// beyond, its `companionInfo` is answered `429` with the time to wait, before the proof is even checked. A
/// customer who mistyped the label a few times is not held back, and after more typos the right proof waits
/// at most `refill`. An address is charged only for its own wrong proofs, so an attacker at another address
/// cannot lock out the phone.
///
/// Each session also limits the wrong proofs that addresses **other than the one that started it** send for
/// it (`burst` at once, then one every `refill`, all such addresses together): an attacker who learned the
/// phone's session id (it travels in clear) and floods it from many addresses gets `429`, while the phone's
/// own proofs for its session are limited only by the phone's address. So nobody can use up the phone's
/// session but the phone.
///
/// Wrong proofs are logged as counts (`Report`): the first after a quiet spell at once, then at most one line
/// per `logWindow` however many addresses send them, never one line per request.
struct WrongProofs<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    struct Limits: Sendable {
        var burst = 10
        var refill: Duration = .seconds(2)
        /// Addresses and sessions whose buckets are remembered; beyond, the one nearest to full is forgotten
        /// (forgetting a bucket only gives it back its burst).
        var maximumTracked = 1024
        var logWindow: Duration = .seconds(10)
    }

    /// What a log line says: the wrong proofs (answered `403`) and the refused tries (answered `429`) since
    /// `since`, from how many addresses, and the address that sent the most.
    struct Report: Sendable {
        var wrongProofs = 0
        var throttled = 0
        var peers = 0
        var busiestPeer = ""
        var since: Instant
    }

    let limits: Limits
    /// When each bucket is full again: per peer address, and per session (for other addresses' proofs).
    private var peerFullAt: [String: Instant] = [:]
    private var sessionFullAt: [String: Instant] = [:]
    /// The counts of the log window open since `windowStart` (nil: no window open).
    private var windowStart: Instant?
    private var counts: [String: Int] = [:]
    private var wrongInWindow = 0
    private var throttledInWindow = 0

    init(limits: Limits = Limits()) { self.limits = limits }

    /// How many buckets are remembered (addresses and sessions), for tests of the bound.
    var trackedCount: Int { peerFullAt.count + sessionFullAt.count }

    /// Nil when `peer` may send a proof for `session` (started by `owner`) now; else how long it must wait.
    func wait(peer: String, session: String, owner: String, at now: Instant) -> Duration? {
        let allowed = limits.refill * max(limits.burst - 1, 0)
        var wait = debt(peerFullAt[peer], at: now) - allowed
        if peer != owner { wait = max(wait, debt(sessionFullAt[session], at: now) - allowed) }
        return wait > .zero ? wait : nil
    }

    /// Counts a wrong or missing proof; returns the log line that is due, if one is.
    mutating func wrong(peer: String, session: String, owner: String, at now: Instant) -> Report? {
        Self.charge(&peerFullAt, peer, at: now, limits: limits)
        if peer != owner { Self.charge(&sessionFullAt, session, at: now, limits: limits) }
        return count(peer: peer, throttled: false, at: now)
    }

    /// Counts a try answered `429`; returns the log line that is due, if one is.
    mutating func throttled(peer: String, at now: Instant) -> Report? { count(peer: peer, throttled: true, at: now) }

    /// The log line of a window that has ended (or of the open one with `force`), if it counted anything.
    mutating func due(at now: Instant, force: Bool = false) -> Report? {
        guard let start = windowStart, force || start.duration(to: now) >= limits.logWindow else { return nil }
        let report = wrongInWindow + throttledInWindow > 0 ? makeReport(since: start) : nil
        windowStart = nil
        counts = [:]
        wrongInWindow = 0
        throttledInWindow = 0
        return report
    }

    /// Forgets the sessions' buckets (a new window, or paired); the addresses' buckets stay.
    mutating func removeSessions() { sessionFullAt = [:] }

    private func debt(_ fullAt: Instant?, at now: Instant) -> Duration {
        fullAt.map { max(.zero, now.duration(to: $0)) } ?? .zero
    }

    private static func charge(_ buckets: inout [String: Instant], _ key: String, at now: Instant, limits: Limits) {
        if buckets[key] == nil, buckets.count >= max(limits.maximumTracked, 1) {
            buckets = buckets.filter { now < $0.value }
            if buckets.count >= max(limits.maximumTracked, 1), let nearest = buckets.min(by: { $0.value < $1.value }) {
                buckets[nearest.key] = nil
            }
        }
        let from = buckets[key].map { max($0, now) } ?? now
        buckets[key] = from.advanced(by: limits.refill)
    }

    /// The first event after a quiet spell is reported at once; later ones are counted in a window of
    /// `logWindow`, reported by the first event (or `due`) after it ends.
    private mutating func count(peer: String, throttled: Bool, at now: Instant) -> Report? {
        let ended = due(at: now)
        if windowStart == nil && ended == nil {
            windowStart = now
            var report = Report(since: now)
            report.peers = 1
            report.busiestPeer = peer
            if throttled { report.throttled = 1 } else { report.wrongProofs = 1 }
            return report
        }
        if windowStart == nil { windowStart = now }
        if throttled { throttledInWindow += 1 } else { wrongInWindow += 1 }
        if counts[peer] != nil || counts.count < max(limits.maximumTracked, 1) { counts[peer, default: 0] += 1 }
        return ended
    }

    private func makeReport(since start: Instant) -> Report {
        var report = Report(since: start)
        report.wrongProofs = wrongInWindow
        report.throttled = throttledInWindow
        report.peers = counts.count
        report.busiestPeer = counts.max { ($0.value, $1.key) < ($1.value, $0.key) }?.key ?? ""
        return report
    }
}
