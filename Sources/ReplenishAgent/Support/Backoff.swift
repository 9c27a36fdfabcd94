/// Exponential backoff with equal jitter and a floor. The wait before retry `attempt` (1 for the first
/// retry) is drawn uniformly from the upper half of `ceiling = min(cap, base * 2^(attempt-1))`, and is never
/// shorter than `floor` (1 s). Jitter spreads thousands of devices that lost the same server at the same
/// moment; the half that is not random keeps every device from retrying at once (full jitter can draw 0 s,
/// and a fleet of devices retrying at once after an outage is exactly the load backoff exists to prevent).
/// The random source is injected (the device uses the system's CSPRNG, never a time-seeded one; tests use a
/// seeded generator).
struct Backoff: Sendable {
    var base: Duration
    var cap: Duration

    /// No retry of any kind comes sooner than this after a failure.
    static let floor = Duration.seconds(1)

    static let orders = Backoff(base: .seconds(1), cap: .seconds(15 * 60))
    /// The alexa program's reports to the maker's cloud.
    static let reports = Backoff(base: .seconds(1), cap: .seconds(15 * 60))
    /// Device status, subscription checks and slot-status reports.
    static let duties = Backoff(base: .seconds(2), cap: .seconds(30 * 60))
    static let tokenRefresh = Backoff(base: .seconds(2), cap: .seconds(10 * 60))
    /// Writing the token file after a failed write (disk full): often enough to catch a freed disk soon.
    static let stateWrite = Backoff(base: .seconds(5), cap: .seconds(5 * 60))
    /// Configuration faults (`invalid_client`): never hammer LWA.
    static let configurationFault = Backoff(base: .seconds(5 * 60), cap: .seconds(60 * 60))

    /// The upper bound of the wait before retry `attempt`.
    func ceiling(attempt: Int) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let scaled = base * (1 << exponent)
        return max(min(scaled, cap), Self.floor)
    }

    /// The lower bound of the wait before retry `attempt`: half the ceiling, at least `floor`.
    func minimum(attempt: Int) -> Duration { max(ceiling(attempt: attempt) / 2, Self.floor) }

    func delay<R: RandomNumberGenerator>(attempt: Int, using generator: inout R) -> Duration {
        let low = minimum(attempt: attempt).milliseconds
        let high = max(ceiling(attempt: attempt).milliseconds, low)
        return .milliseconds(Int64.random(in: low...high, using: &generator))
    }
}

extension Duration {
    /// Whole milliseconds (rounded down).
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
