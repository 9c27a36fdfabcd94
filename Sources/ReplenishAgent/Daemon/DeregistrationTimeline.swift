/// When a queued deregistration is tried, as a value (the shape of `DutyTimeline`): it takes the events of a
/// try with the current instant and says what to do; it reads no clock and makes no call.
/// `DeregistrationQueue` carries its actions out.
///
/// The rules: a queued call waits `callerGrace` for its caller (a reset doing its local part first) before the
/// queue tries on its own; never two tries at once; after a failure, no try before the backoff's end (the
/// duties' backoff, never sooner than a server's `Retry-After` or the 1 s floor), not even the caller's.
struct DeregistrationTimeline<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    enum Action: Equatable, Sendable {
        /// Nothing queued, or a try is out: wait for a change.
        case waitForChange
        case wait(until: Instant)
        case attempt
    }

    /// What a caller's `tryNow` may do.
    enum CallerTry: Equatable, Sendable {
        case attempt
        /// A try is out already.
        case busy
        /// The last try failed a moment ago: no call before the backoff ends (the queue retries then).
        case backingOff
    }

    static var callerGrace: Duration { .seconds(30) }

    /// Failed tries in a row (the backoff's attempt).
    private(set) var failures = 0
    private var retryAt: Instant?
    private var trying = false

    init() {}

    /// The queue's own next step (`queued`: a call waits in the file).
    func next(queued: Bool, at now: Instant) -> Action {
        guard queued, !trying else { return .waitForChange }
        if let retryAt, now < retryAt { return .wait(until: retryAt) }
        return .attempt
    }

    func callerTry(at now: Instant) -> CallerTry {
        if trying { return .busy }
        if failures > 0, let retryAt, now < retryAt { return .backingOff }
        return .attempt
    }

    /// A call was queued: its caller has `callerGrace` to try it first.
    mutating func enqueued(at now: Instant) {
        failures = 0
        retryAt = now.advanced(by: Self.callerGrace)
    }

    /// The caller gave its try up: the grace ends now (a backoff after a failure stays).
    mutating func callerWillNotTry() {
        if failures == 0 { retryAt = nil }
    }

    mutating func started() { trying = true }

    /// DRS answered (or the pairing was gone already): nothing waits any more.
    mutating func succeeded() {
        trying = false
        failures = 0
        retryAt = nil
    }

    /// The try failed: the next one after `backoff` (the backoff of attempt `failures + 1`).
    mutating func failed(at now: Instant, backoff: Duration) {
        trying = false
        failures += 1
        retryAt = now.advanced(by: max(backoff, Backoff.floor))
    }
}
