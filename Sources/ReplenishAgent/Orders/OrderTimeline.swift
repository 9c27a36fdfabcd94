/// When the order service sends what, as a value (the shape of `CodeLinking` and `DutyTimeline`): it takes the
/// events of a delivery (a retry planned, no token to be had, a write that failed) with the current instant, and
/// says what to do next; it reads no clock, no file and makes no call. `Orders` carries its actions out.
///
/// The rules:
/// - A failed outbox write is tried again at its time, and nothing is sent before it succeeds (the "sent,
///   answer unknown" mark must be durable before a call leaves).
/// - Each slot waits for its own retry instant (never sooner than `Backoff.floor`); after a restart every
///   pending entry is due at once.
/// - Nothing is sent while unpaired: a due entry then waits for a change (a pairing, new tokens).
/// - A slot that found no token waits for the tokens to change (or, paired, for the refresh's backoff).
/// - An entry that must wait for a synchronised wall clock (an unanswered call from an earlier boot) is looked
///   at again every `clockPoll`, and said once.
struct OrderTimeline<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    enum Action: Equatable, Sendable {
        /// Write the outbox in memory again (an earlier write failed).
        case retryWrite
        case send(slot: String)
        /// These slots' entries wait for the wall clock to be synchronised: say so (once).
        case sayWaitingForClock(slots: [String])
        /// Nothing due before this instant (nil: before a change).
        case wait(until: Instant?)
    }

    /// A pending entry as the timeline sees it.
    struct Pending: Equatable, Sendable {
        var slot: String
        /// Its unanswered call is from an earlier boot, and the wall clock is not known synchronised yet.
        var waitsForClock = false
    }

    static var clockPoll: Duration { .seconds(5) }
    /// How long a slot that found the device unpaired waits before it looks again without a change.
    static var unpairedWait: Duration { .seconds(24 * 3600) }

    /// When each slot may next be tried (in memory: after a restart every pending entry is due at once).
    private var notBefore: [String: Instant] = [:]
    /// Slots whose last try found no token to send with: due again as soon as the tokens change.
    private var waitingForTokens: Set<String> = []
    /// A write of the outbox failed: the next try is at this instant.
    private(set) var writeRetryAt: Instant?
    private var saidClockWait = false

    init() {}

    mutating func next(pending: [Pending], paired: Bool, at now: Instant) -> Action {
        if let at = writeRetryAt { return at <= now ? .retryWrite : .wait(until: at) }
        let waitingForClock = pending.filter(\.waitsForClock).map(\.slot)
        let sendable = pending.filter { !$0.waitsForClock }.map(\.slot)
        let due = sendable.first { slot in notBefore[slot].map { $0 <= now } ?? true }
        if let due, paired { return .send(slot: due) }
        if !waitingForClock.isEmpty && !saidClockWait {
            saidClockWait = true
            return .sayWaitingForClock(slots: waitingForClock)
        }
        // Due but unpaired: only a change (a pairing) lets it go.
        if due != nil { return .wait(until: nil) }
        var next = sendable.compactMap { notBefore[$0] }.min()
        if !waitingForClock.isEmpty {
            let poll = now.advanced(by: Self.clockPoll)
            next = next.map { min($0, poll) } ?? poll
        }
        return .wait(until: next)
    }

    /// A press was accepted and its write succeeded; a newly queued slot is due at once.
    mutating func accepted(slot: String, queued: Bool) {
        writeRetryAt = nil
        if queued { notBefore[slot] = nil }
    }

    /// Whether a press just accepted for `slot` is sent at the next step: no write to retry first, and the slot
    /// not backing off (a newly queued entry is due at once, `accepted`).
    func sendsAtOnce(slot: String, queued: Bool, at now: Instant) -> Bool {
        writeRetryAt == nil && (queued || notBefore[slot].map { $0 <= now } ?? true)
    }

    /// The slot is tried again after `delay` (never sooner than docs/behaviour.md's floor).
    mutating func retry(_ slot: String, after delay: Duration, at now: Instant) {
        notBefore[slot] = now.advanced(by: max(delay, Backoff.floor))
    }

    /// The slot found no token to send with: it is due again when the tokens change. Unpaired, nothing else
    /// makes it due; otherwise a `retry` at the refresh's backoff follows.
    mutating func noToken(_ slot: String, notPaired: Bool, at now: Instant) {
        waitingForTokens.insert(slot)
        if notPaired { notBefore[slot] = now.advanced(by: Self.unpairedWait) }
    }

    /// The slot's order is done (acknowledged): nothing of it is waited for.
    mutating func done(_ slot: String) {
        notBefore[slot] = nil
    }

    /// New tokens: the slots that waited for them are due now.
    mutating func tokensChanged() {
        for slot in waitingForTokens { notBefore[slot] = nil }
        waitingForTokens.removeAll()
    }

    /// The wall clock was just set: whatever failed meanwhile (TLS refuses certificates "not yet valid" while
    /// the clock says 1970) is due now, not at the end of its backoff.
    mutating func clockSet() {
        notBefore.removeAll()
    }

    /// An outbox write failed (`retryIn`: the write backoff) or succeeded (nil).
    mutating func written(failedRetryingIn retryIn: Duration?, at now: Instant) {
        writeRetryAt = retryIn.map { now.advanced(by: $0) }
    }

    /// A factory reset: nothing is pending, nothing waited for.
    mutating func wiped() {
        notBefore.removeAll()
        waitingForTokens.removeAll()
        writeRetryAt = nil
    }
}
