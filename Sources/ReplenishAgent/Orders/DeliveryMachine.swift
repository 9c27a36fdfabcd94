/// The delivery loop's decisions as a value, in the shape of Hummingbird's connection state machines: `DeliveryLoop`
/// hands it each event (a look at the outbox and the pairing, a press recorded, what came of a try, a write's
/// result, new tokens, the wall clock set, a wipe) with the current instant, and carries out the action it
/// returns. It reads no clock, no file and makes no call.
///
/// The rules:
/// - A failed outbox write is tried again at its time (at once after a press), and nothing is sent before it
///   succeeds (the "sent, answer unknown" mark must be durable before a call leaves).
/// - An entry that must not be sent (a slot no longer configured, a press of another pairing, a call
///   unanswered for over a day: `Outbox.parkReason`) is parked before anything is sent; a look that finds
///   none parks nothing.
/// - Each slot waits for its own retry instant (never sooner than `Backoff.floor`); after a restart every
///   pending entry is due at once.
/// - Nothing is sent while unpaired: a due entry then waits for a change (a pairing, new tokens).
/// - A slot that found no token waits for the tokens to change (or, paired, for the refresh's backoff); tokens
///   that changed while its try asked for one let it go at once.
/// - An entry that must wait for a synchronised wall clock (an unanswered call from an earlier boot) is looked
///   at again every `clockPoll`, and said once.
struct DeliveryMachine<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    enum Action: Equatable, Sendable {
        /// Write the outbox in memory again (an earlier write failed).
        case retryWrite
        /// Park the entries the look found must not be sent (`PendingSlot.parkReason`).
        case park
        case send(slot: String)
        /// These slots' entries wait for the wall clock to be synchronised: say so (once).
        case sayWaitingForClock(slots: [String])
        /// Nothing due before this instant (nil: before a change).
        case wait(until: Instant?)
    }

    /// What came of one try of a slot's entry.
    enum Outcome: Equatable, Sendable {
        /// DRS acknowledged the order, or refused it for good (the entry is parked): nothing is waited for.
        case finished
        /// Try again after this delay (never sooner than `Backoff.floor`).
        case retry(after: Duration)
        /// No token to send with: the slot is due again when the tokens change, or (`retryAfter`: paired, the
        /// refresh backing off) after that delay; unpaired (nil), only a change lets it go.
        case noToken(retryAfter: Duration?)
    }

    static var clockPoll: Duration { .seconds(5) }
    /// How long a slot that found the device unpaired waits before it looks again without a change.
    static var unpairedWait: Duration { .seconds(24 * 3600) }

    /// When each slot may next be tried (in memory: after a restart every pending entry is due at once).
    private var notBefore: [String: Instant] = [:]
    /// Slots whose last try found no token to send with: due again as soon as the tokens change.
    private var waitingForTokens: Set<String> = []
    /// The tokens changed since the last `send` (its try may have asked for a token before they did).
    private var tokensChangedSinceSend = false
    /// A write of the outbox failed: the next try is at this instant.
    private(set) var writeRetryAt: Instant?
    private var saidClockWait = false

    init() {}

    /// A look at the pending entries and the pairing (read once, `DeliveryLoop.step`): what to do now.
    mutating func next(pending: [PendingSlot], paired: Bool, at now: Instant) -> Action {
        if let at = writeRetryAt { return at <= now ? .retryWrite : .wait(until: at) }
        if pending.contains(where: { $0.parkReason != nil }) { return .park }
        let waitingForClock = pending.filter(\.waitsForClock).map(\.slot)
        let sendable = pending.filter { !$0.waitsForClock }.map(\.slot)
        let due = sendable.first { slot in notBefore[slot].map { $0 <= now } ?? true }
        if let due, paired {
            tokensChangedSinceSend = false
            return .send(slot: due)
        }
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

    /// Whether a press about to be recorded for `slot` is sent at the next look: no write to retry first, and
    /// the slot not backing off (a newly queued entry is due at once). Its write may then carry the call's mark.
    func sendsAtOnce(slot: String, queued: Bool, at now: Instant) -> Bool {
        writeRetryAt == nil && (queued || notBefore[slot].map { $0 <= now } ?? true)
    }

    /// A press was recorded; a newly queued slot is due at once. A write to retry is tried now, not trusted to the
    /// press's write: a commit may have failed after it (the outbox writes only if the file is still behind).
    mutating func pressRecorded(slot: String, queued: Bool, at now: Instant) {
        if writeRetryAt != nil { writeRetryAt = now }
        if queued { notBefore[slot] = nil }
    }

    /// What came of one try of `slot`.
    mutating func tried(_ slot: String, _ outcome: Outcome, at now: Instant) {
        switch outcome {
        case .finished:
            notBefore[slot] = nil
        case .retry(let delay):
            notBefore[slot] = now.advanced(by: max(delay, Backoff.floor))
        case .noToken where tokensChangedSinceSend:
            // New tokens came while this try asked for one: it is due again at once.
            notBefore[slot] = nil
        case .noToken(let retryAfter):
            waitingForTokens.insert(slot)
            notBefore[slot] = now.advanced(by: retryAfter.map { max($0, Backoff.floor) } ?? Self.unpairedWait)
        }
    }

    /// New tokens (a pairing, a refresh): the slots that waited for them are due now.
    mutating func tokensChanged() {
        tokensChangedSinceSend = true
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

    /// A factory reset or the account left: nothing is pending, nothing waited for.
    mutating func wiped() {
        notBefore.removeAll()
        waitingForTokens.removeAll()
        writeRetryAt = nil
    }
}

/// A pending entry as one look of the delivery loop sees it (`OrderBook.look`).
struct PendingSlot: Sendable {
    var slot: String
    /// Its unanswered call is from an earlier boot, and the wall clock is not known synchronised yet.
    var waitsForClock = false
    /// Why it must not be sent, if it must not (`Outbox.parkReason`): the look's `park` action parks it.
    var parkReason: String?
}
