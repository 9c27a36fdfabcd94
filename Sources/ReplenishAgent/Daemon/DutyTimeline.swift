/// When the duties run, as a value (the shape of `CodeLinking`): it takes events and the current instant and
/// says what to do next; it reads no clock and makes no call. `Duties` carries its actions out.
///
/// The rules: the first device status lands at a random moment of the start-up window (a fleet that lost power
/// together does not report in the same second), then daily with jitter; a failure retries on the duties
/// backoff, never sooner than a server's `Retry-After`. A new pairing makes them due at once. Nothing is sent
/// while unpaired, nor while the wall clock is not set (device and slot status carry dates): then the clock is
/// looked at every `clockPoll`, and once it is set the duties are due at once. Slot-status reports (a level
/// sensor found a slot low) go first, oldest first, the newest per slot, with their own backoff.
struct DutyTimeline<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    enum Action: Equatable, Sendable {
        /// Not paired: nothing until the pairing changes.
        case waitForPairing
        /// The wall clock is not set: look again at `until` (`firstTime`: say so in the log once).
        case waitForClock(until: Instant, firstTime: Bool)
        /// The wall clock was found set after a wait for it: say so; the duties are due now.
        case clockSet
        case sendReport(slot: String, report: SlotStatusReport)
        case performDuties
        /// Nothing due before this instant (or a change).
        case wait(until: Instant)
    }

    static var clockPoll: Duration { .seconds(2) }

    private var random: RandomSource
    private var dueAt: Instant?
    private var failures = 0
    private var reports: [(slot: String, report: SlotStatusReport)] = []
    private var reportsNotBefore: Instant?
    private var reportFailures = 0
    private var waitingForClock = false

    /// Started at `now`: the first duties in the start-up window.
    init(startedAt now: Instant, random: RandomSource = .system) {
        self.random = random
        dueAt = now.advanced(by: FleetSpread.startupDelay(using: &self.random))
    }

    mutating func next(at now: Instant, paired: Bool, clockTrusted: Bool) -> Action {
        guard paired else { return .waitForPairing }
        guard clockTrusted else {
            defer { waitingForClock = true }
            return .waitForClock(until: now.advanced(by: Self.clockPoll), firstTime: !waitingForClock)
        }
        if waitingForClock {
            waitingForClock = false
            dueAt = nil
            return .clockSet
        }
        if let first = reports.first, reportsNotBefore.map({ $0 <= now }) ?? true {
            return .sendReport(slot: first.slot, report: first.report)
        }
        let reportAt = reports.isEmpty ? nil : reportsNotBefore
        if let dueAt, now < dueAt {
            return .wait(until: reportAt.map { min($0, dueAt) } ?? dueAt)
        }
        return .performDuties
    }

    /// A new pairing: the duties are due at once.
    mutating func pairingChanged() { dueAt = nil }

    /// A slot-status report to send; it replaces the slot's older one, and goes at the next chance.
    mutating func queueReport(slot: String, report: SlotStatusReport) {
        reports.removeAll { $0.slot == slot }
        reports.append((slot, report))
        reportsNotBefore = nil
    }

    mutating func dutiesDone(at now: Instant) {
        failures = 0
        dueAt = now.advanced(by: FleetSpread.dailyDelay(using: &random))
    }

    /// Returns the wait before the retry (for the log).
    mutating func dutiesFailed(_ error: AgentError, at now: Instant) -> Duration {
        failures += 1
        let delay = FleetSpread.retryDelay(after: error, attempt: failures, using: &random)
        dueAt = now.advanced(by: delay)
        return delay
    }

    mutating func reportSent(slot: String, report: SlotStatusReport) {
        reports.removeAll { $0.slot == slot && $0.report == report }
        reportFailures = 0
    }

    /// Returns the wait before the retry (for the log).
    mutating func reportFailed(_ error: AgentError, at now: Instant) -> Duration {
        reportFailures += 1
        let delay = FleetSpread.retryDelay(after: error, attempt: reportFailures, using: &random)
        reportsNotBefore = now.advanced(by: delay)
        return delay
    }
}
