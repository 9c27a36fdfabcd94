/// When the watchdog pings, as a value: a round (every probe asked) is due every `interval`; a healthy round
/// pings, a failing one does not; a change of health is reported once per streak. It reads no clock and sends
/// nothing; `WatchdogPinger` asks the probes and carries out what it says.
struct WatchdogRounds<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// What a round's result asks for.
    struct Outcome: Equatable, Sendable {
        var ping: Bool
        /// A change of health to report: the failing probe's name, or nil (healthy again); nil: no change.
        var healthChange: String??
        var nextRound: Instant
    }

    let interval: Duration
    private var failing: String?
    private var nextRound: Instant?

    init(interval: Duration) {
        self.interval = interval
    }

    /// nil when a round is due at `now`; else when it is.
    func due(at now: Instant) -> Instant? {
        guard let nextRound, now < nextRound else { return nil }
        return nextRound
    }

    /// A round ended at `now`; `failed`: the first probe that failed (nil: all passed).
    mutating func roundDone(failed: String?, at now: Instant) -> Outcome {
        let change: String?? = failed != failing ? .some(failed) : .none
        failing = failed
        let next = now.advanced(by: interval)
        nextRound = next
        return Outcome(ping: failed == nil, healthChange: change, nextRound: next)
    }
}
