/// Exponential backoff with full jitter: the wait before retry `attempt` (1 for the first retry) is drawn
/// uniformly from zero to `min(cap, base * 2^(attempt-1))`. Full jitter spreads thousands of devices that
/// lost the same server at the same moment. The random source is injected (the device uses the system's
/// CSPRNG, never a time-seeded one; tests use a seeded generator).
struct Backoff: Sendable, Equatable {
    var base: Duration
    var cap: Duration

    static let orders = Backoff(base: .seconds(1), cap: .seconds(15 * 60))
    static let tokenRefresh = Backoff(base: .seconds(2), cap: .seconds(10 * 60))
    /// Configuration faults (`invalid_client`): never hammer LWA.
    static let configurationFault = Backoff(base: .seconds(5 * 60), cap: .seconds(60 * 60))

    /// The upper bound of the wait before retry `attempt`.
    func ceiling(attempt: Int) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let scaled = base * (1 << exponent)
        return min(scaled, cap)
    }

    func delay<R: RandomNumberGenerator>(attempt: Int, using generator: inout R) -> Duration {
        let ceiling = ceiling(attempt: attempt)
        let milliseconds = ceiling.components.seconds * 1000 + ceiling.components.attoseconds / 1_000_000_000_000_000
        guard milliseconds > 0 else { return .zero }
        return .milliseconds(Int64.random(in: 0...milliseconds, using: &generator))
    }
}
