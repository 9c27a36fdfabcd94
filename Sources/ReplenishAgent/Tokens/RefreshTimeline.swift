/// When the token manager refreshes, as a value (the shape of `CodeLinking` and `DutyTimeline`): it takes the
/// events of a refresh and a token write with the current instant, and says what to do next; it reads no clock
/// and makes no call. `TokenManager` carries its actions out, and lends it its one random source
/// (`TokenTime.random`) for the random moments.
///
/// The rules:
/// - A refresh is due by the wall clock (`RefreshSchedule`: the facts give the seconds until it); the wait for
///   it is capped at `maximumWait`, so the expiry is looked at again after a suspend or a clock step.
/// - A token that was due at start (the device was off) is refreshed at a random moment of the start-up window,
///   a tenth of the token's lifetime at most: a fleet back from a power cut does not ask LWA in the same second.
/// - Scheduled refreshes are at least `minimumSpacing` apart, whatever lifetime LWA grants.
/// - After a failure, no refresh (scheduled or asked for by a caller) before the backoff's end: the retry gate.
/// - A token write that failed is tried again at its own time, before anything else that is due.
struct RefreshTimeline<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    enum Action: Equatable, Sendable {
        /// Not paired: nothing until the pairing changes.
        case waitForPairing
        /// The token was due at start: draw a random moment of this window and say it (`startupWait`).
        case startupDelay(window: Duration)
        /// Write the tokens in memory again (an earlier write failed).
        case retryWrite
        case refresh(Reason)
        /// Nothing due before this instant (or a change).
        case wait(until: Instant)
    }

    enum Reason: String, Sendable {
        case scheduled
        /// The backoff after a failure is over.
        case retry
    }

    /// What the token manager knows at the moment it asks.
    struct Facts: Sendable {
        var paired: Bool
        /// Seconds until the refresh is due by the wall clock (`RefreshSchedule.secondsUntilRefresh`).
        var secondsUntilRefresh: Double
        /// The access token's lifetime as LWA granted it, in seconds.
        var lifetime: Double
    }

    static var minimumSpacing: Duration { .seconds(5) }
    static var maximumWait: Duration { .seconds(300) }

    /// The start-up rule is still to be looked at (the tokens came from the file at start).
    private var startup: Bool
    /// The random moment of the start-up window the refresh waits for.
    private var startupUntil: Instant?
    private var lastScheduledRefresh: Instant?
    /// The retry gate: after a failed refresh, none before this instant.
    private(set) var retryNotBefore: Instant?
    /// A token write failed: the next try is at this instant.
    private(set) var writeRetryAt: Instant?

    /// The refresh failures since the last success: how many, the last one's message (the retry-wait state's
    /// reason) and its code (the retry gate's error).
    struct Failure: Sendable, Equatable {
        var attempts: Int
        var message: String
        var code: AgentError.Code
    }

    private(set) var failure: Failure?
    /// The failure last logged: a repeated configuration fault (`unauthorized_client`) is logged once.
    private var lastLogged: String?
    /// The token writes that failed in a row.
    private var writes = WriteRetry()
    /// Where in its margin the scheduled refresh falls (`RefreshSchedule`), drawn again after every refresh so
    /// that a fleet's refreshes spread.
    private(set) var jitter: Double

    /// `fromDisk`: the tokens came from the token file at start (a restart, not a pairing made since).
    init(fromDisk: Bool, using random: inout RandomSource) {
        startup = fromDisk
        jitter = Double.random(in: 0..<1, using: &random)
    }

    mutating func next(_ facts: Facts, at now: Instant) -> Action {
        if startup {
            startup = false
            if facts.paired && facts.secondsUntilRefresh <= 0 {
                // Short-lived tokens cannot wait long: at most a tenth of the lifetime.
                return .startupDelay(
                    window: min(FleetSpread.startupWindow, .milliseconds(Int64(facts.lifetime * 100))))
            }
        }
        guard facts.paired else { return .waitForPairing }
        // The start-up moment holds while the token is still due and nothing failed meanwhile (a caller that
        // needed a token sooner refreshed it, or set the retry gate).
        if let until = startupUntil {
            if now < until && facts.secondsUntilRefresh <= 0 && retryNotBefore == nil { return .wait(until: until) }
            startupUntil = nil
        }
        if let at = writeRetryAt, at <= now { return .retryWrite }
        func wait(until instant: Instant) -> Action {
            .wait(until: writeRetryAt.map { min($0, instant) } ?? instant)
        }
        if let deadline = retryNotBefore {
            return now < deadline ? wait(until: deadline) : .refresh(.retry)
        }
        if facts.secondsUntilRefresh > 0 {
            // Rounded up to the millisecond: a wait that ends before the refresh is due would only spin.
            let seconds = min(facts.secondsUntilRefresh, Self.maximumWait / .seconds(1))
            return wait(until: now.advanced(by: .milliseconds(Int64((seconds * 1000).rounded(.up)))))
        }
        if let last = lastScheduledRefresh, now < last.advanced(by: Self.minimumSpacing) {
            return wait(until: last.advanced(by: Self.minimumSpacing))
        }
        return .refresh(.scheduled)
    }

    /// The moment of the start-up window drawn for `.startupDelay`.
    mutating func startupWait(until instant: Instant) {
        startupUntil = instant
    }

    /// `.startupDelay(window)`: draws a moment of the window from `now` (`FleetSpread`) and waits for it.
    mutating func startupWait(window: Duration, at now: Instant, using random: inout RandomSource) {
        startupWait(until: now.advanced(by: FleetSpread.startupDelay(window: window, using: &random)))
    }

    /// How long a caller that needs a token now must wait (the retry gate), nil when it may ask LWA.
    func retryGate(at now: Instant) -> Duration? {
        guard let deadline = retryNotBefore, now < deadline else { return nil }
        return now.duration(to: deadline)
    }

    /// A refresh succeeded. Only a scheduled one starts the spacing; a failure's retry follows the backoff. The
    /// failures are forgotten and the jitter drawn again.
    mutating func refreshed(_ reason: Reason?, at now: Instant, using random: inout RandomSource) {
        retryNotBefore = nil
        if reason == .scheduled { lastScheduledRefresh = now }
        failure = nil
        lastLogged = nil
        jitter = Double.random(in: 0..<1, using: &random)
    }

    /// A refresh failed with `error`: the next one (scheduled or asked for) waits for the backoff, slower for a
    /// configuration fault (`unauthorized_client`) and never sooner than LWA's own `Retry-After` (429, 503).
    /// Returns the wait and whether the failure is worth a log line (a configuration fault is said once).
    mutating func refreshFailed(_ error: AgentError, at now: Instant, using random: inout RandomSource)
        -> (wait: Duration, attempt: Int, log: Bool)
    {
        let attempt = (failure?.attempts ?? 0) + 1
        failure = Failure(attempts: attempt, message: error.message, code: error.code)
        let backoff = error.code == .unauthorizedClient ? Backoff.configurationFault : Backoff.tokenRefresh
        var wait = backoff.delay(attempt: attempt, using: &random)
        if let asked = error.retryAfter { wait = max(wait, asked) }
        refreshFailed(at: now, backoff: wait)
        let log = lastLogged != error.message || error.code != .unauthorizedClient
        if log { lastLogged = error.message }
        return (wait, attempt, log)
    }

    /// A refresh failed: the next one (scheduled or asked for) after `backoff`.
    mutating func refreshFailed(at now: Instant, backoff: Duration) {
        retryNotBefore = now.advanced(by: backoff)
    }

    /// The wall clock was just set: a refresh that is backing off (TLS failed while the clock said 1970) is
    /// tried now.
    mutating func clockSet(at now: Instant) {
        if retryNotBefore != nil { retryNotBefore = now }
    }

    /// A token write failed (`retryIn`: the write backoff) or succeeded (nil).
    mutating func written(failedRetryingIn retryIn: Duration?, at now: Instant) {
        writeRetryAt = retryIn.map { now.advanced(by: $0) }
        if retryIn == nil { writes.succeeded() }
    }

    /// A token write failed at `now`: the next try after the state-write backoff (`WriteRetry`); returns the
    /// wait and the attempt.
    mutating func writeFailed(at now: Instant, using random: inout RandomSource) -> (wait: Duration, attempt: Int) {
        let wait = writes.failed(using: &random)
        written(failedRetryingIn: wait, at: now)
        return (wait, writes.failures)
    }

    /// Paired or unpaired: the retry state starts over.
    mutating func pairingChanged() {
        startupUntil = nil
        retryNotBefore = nil
        writeRetryAt = nil
        writes.succeeded()
        failure = nil
        lastLogged = nil
    }
}
