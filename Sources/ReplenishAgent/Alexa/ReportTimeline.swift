/// When the unit reports and asks the cloud about its claim, as a value (the shape of `DeregistrationTimeline`):
/// it takes the outcome of each call with the current instant and says what to do next; it reads no clock and
/// makes no call. `SupplyReporter` carries its actions out.
///
/// The rules: a change is reported at once; the daily report comes `day` after the last acknowledged one (at the
/// start: the rest of the day since the one `reports.json` remembers, or at once when it remembers none or the
/// clock is not trusted); after a failure nothing is sent before the backoff's end, never sooner than the cloud's
/// `Retry-After`; an unclaimed unit asks about its claim every `claimCheckInterval`, and at once after a long
/// press, and stops asking once claimed (each report's answer says it too).
struct ReportTimeline<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    enum Action: Equatable, Sendable {
        case send
        case checkClaim
        case wait(until: Instant)
    }

    static var day: Duration { .seconds(24 * 3600) }
    static var claimCheckInterval: Duration { .seconds(10 * 60) }
    /// The longest `Retry-After` taken as given (a longer one waits this long).
    static var longestRetryAfter: Duration { .seconds(3600) }

    /// Failed calls in a row (the backoff's attempt).
    private(set) var failures = 0
    private var retryAt: Instant?
    private(set) var dailyAt: Instant
    private var claimCheckAt: Instant?

    /// `dailyAt`: when the first daily report is due; `claimed`: what `reports.json` remembers of the claim.
    init(dailyAt: Instant, claimed: Bool?, at now: Instant) {
        self.dailyAt = dailyAt
        claimCheckAt = claimed == true ? nil : now
    }

    /// The first daily report's time for a start at `now`: a day after the last one (`lastDailyAt`, wall-clock
    /// seconds) as far as `wallTime` can tell, at once when either is unknown or they disagree (a clock set back).
    static func firstDaily(lastDailyAt: Double?, wallTime: Double?, now: Instant) -> Instant {
        guard let lastDailyAt, let wallTime, wallTime >= lastDailyAt else { return now }
        let elapsed = Duration.seconds(wallTime - lastDailyAt)
        return elapsed >= day ? now : now.advanced(by: day - elapsed)
    }

    func isDailyDue(at now: Instant) -> Bool { now >= dailyAt }

    func next(hasUnreported: Bool, at now: Instant) -> Action {
        if let retryAt, now < retryAt { return .wait(until: retryAt) }
        if hasUnreported || now >= dailyAt { return .send }
        if let claimCheckAt {
            return now >= claimCheckAt ? .checkClaim : .wait(until: min(claimCheckAt, dailyAt))
        }
        return .wait(until: dailyAt)
    }

    /// The cloud acknowledged a report (`daily`: the daily one) and said whether the unit is claimed.
    mutating func reported(daily: Bool, claimed: Bool?, at now: Instant) {
        succeeded()
        if daily { dailyAt = now.advanced(by: Self.day) }
        if let claimed { claimAnswered(claimed, at: now) }
    }

    /// The cloud said whether the unit is claimed.
    mutating func claimAnswered(_ claimed: Bool, at now: Instant) {
        succeeded()
        claimCheckAt = claimed ? nil : now.advanced(by: Self.claimCheckInterval)
    }

    /// A call failed: nothing before `delay` (the backoff's draw for `failures + 1`), nor before `retryAfter`.
    mutating func failed(delay: Duration, retryAfter: Duration?, at now: Instant) {
        failures += 1
        let wait = max(delay, min(retryAfter ?? .zero, Self.longestRetryAfter))
        retryAt = now.advanced(by: wait)
    }

    /// A long press: ask about the claim now (a backoff under way still holds).
    mutating func checkClaimSoon(at now: Instant) { claimCheckAt = now }

    private mutating func succeeded() {
        failures = 0
        retryAt = nil
    }
}
