/// How one device's background calls spread in time, so that a fleet started together (a power cut, an
/// outage's end) does not call LWA and DRS in step: the start-up window (the duties' first round, the token
/// manager's catch-up refresh), the daily device status's moment, and the wait after a failed background call
/// (the duties, the order follow-up, the deregistration queue). Pure rules, also used by the fleet simulation
/// (`fleet-sim`), so the simulation measures the agent's own schedule and not a copy of it.
enum FleetSpread {
    /// The first duties after a start land uniformly in this window. docs/behaviour.md promises device
    /// status within 30 s of a start; the rest of those 30 s is left for the request itself.
    static let startupWindow = Duration.seconds(25)
    /// Device status is due daily; each day's moment moves by up to this much either way, so a fleet
    /// synchronised by a power cut drifts apart instead of reporting in the same second every day.
    static let dailyJitter = Duration.seconds(15 * 60)

    /// A moment in the start-up window (`window` is a parameter for the fleet simulation only).
    static func startupDelay<R: RandomNumberGenerator>(window: Duration = startupWindow, using random: inout R)
        -> Duration
    {
        .milliseconds(Int64.random(in: 0...window.milliseconds, using: &random))
    }

    static func dailyDelay<R: RandomNumberGenerator>(using random: inout R) -> Duration {
        let jitter = dailyJitter.milliseconds
        return .seconds(24 * 3600) + .milliseconds(Int64.random(in: -jitter...jitter, using: &random))
    }

    /// The wait after a failed duty: the duties backoff (equal jitter, at least 1 s), never shorter than a
    /// server's `Retry-After` or the token manager's own backoff deadline.
    static func retryDelay<R: RandomNumberGenerator>(after error: AgentError, attempt: Int, using random: inout R)
        -> Duration
    {
        max(Backoff.duties.delay(attempt: attempt, using: &random), error.retryAfter ?? .zero)
    }
}
