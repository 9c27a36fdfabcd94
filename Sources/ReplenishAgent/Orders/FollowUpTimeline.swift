/// When the open orders are asked about (`getOrderInfo`), as a value (the shape of `DutyTimeline`): it takes the
/// open orders and the answers with the current instant and says what to do next; it reads no clock and makes
/// no call. `OrderTracker` carries its actions out.
///
/// The rules: nothing is asked while unpaired or while no order is open; an open order is first asked about one
/// `OrderFollowUp.delay` after it is seen (after a restart, one delay from the start), then again at that
/// cadence while DRS says it is open; a failure retries on the duties backoff (never sooner than `Retry-After`).
struct FollowUpTimeline<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    enum Action: Equatable, Sendable {
        /// Unpaired, or no order open: wait for a change (a pairing, a placed order).
        case waitForChange
        case wait(until: Instant)
        case check(slot: String)
    }

    let phase: AgentConfig.Phase
    private var random: RandomSource
    /// When each open order is asked about next.
    private var dueAt: [String: Instant] = [:]
    /// Failed questions in a row (the backoff's attempt).
    private var failures = 0

    init(phase: AgentConfig.Phase, random: RandomSource = .system) {
        self.phase = phase
        self.random = random
    }

    /// `open`: the slots whose last placed order is open, as the status record says.
    mutating func next(paired: Bool, open: [String], at now: Instant) -> Action {
        guard paired else { return .waitForChange }
        dueAt = dueAt.filter { open.contains($0.key) }
        for slot in open where dueAt[slot] == nil {
            dueAt[slot] = now.advanced(by: OrderFollowUp.delay(phase: phase, using: &random))
        }
        guard let (slot, at) = dueAt.min(by: { $0.value < $1.value }) else { return .waitForChange }
        return now < at ? .wait(until: at) : .check(slot: slot)
    }

    /// DRS answered about the slot's order: asked again at the cadence while it is open.
    mutating func answered(slot: String, open: Bool, at now: Instant) {
        failures = 0
        dueAt[slot] = open ? now.advanced(by: OrderFollowUp.delay(phase: phase, using: &random)) : nil
    }

    /// The question failed: asked again after the backoff. Returns the wait, for the log.
    mutating func failed(slot: String, error: AgentError, at now: Instant) -> Duration {
        failures += 1
        let delay = FleetSpread.retryDelay(after: error, attempt: failures, using: &random)
        dueAt[slot] = now.advanced(by: delay)
        return delay
    }
}
