/// Turns a level input (a float switch, or a scale's threshold output: active = running out) into "low"
/// events. Hysteresis in time: the level must stay active for `minimumActive` before it counts (a wave in
/// the tank is not an order), and after it counted it must stay inactive for `minimumInactive` (refilled)
/// before it can count again, so a flapping sensor gives at most one low event per refill. Pure: the caller
/// passes times and calls `tick` at `deadline`.
struct LevelSensor<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    enum State: Equatable, Sendable {
        /// Full enough; waiting for the level to go active.
        case armed
        /// Active since this time; counts at `since + minimumActive` unless it goes inactive first.
        case goingLow(since: Instant)
        /// Counted; waiting for a refill.
        case low
        /// Inactive since this time after counting; re-armed at `since + minimumInactive`.
        case refilling(since: Instant)
    }

    let minimumActive: Duration
    let minimumInactive: Duration
    private(set) var state: State = .armed

    init(minimumActive: Duration, minimumInactive: Duration) {
        self.minimumActive = minimumActive
        self.minimumInactive = minimumInactive
    }

    var deadline: Instant? {
        switch state {
        case .goingLow(let since): since.advanced(by: minimumActive)
        case .refilling(let since): since.advanced(by: minimumInactive)
        case .armed, .low: nil
        }
    }

    /// A raw level report (edges and repeats alike).
    mutating func level(active: Bool, at time: Instant) {
        switch (state, active) {
        case (.armed, true): state = .goingLow(since: time)
        case (.goingLow, false): state = .armed
        case (.low, false): state = .refilling(since: time)
        case (.refilling, true): state = .low
        default: break
        }
    }

    /// What a deadline brought: the supply found low (once per refill), or a refill confirmed (the level
    /// stayed inactive long enough after a low; the sensor is armed again).
    enum Event: Equatable, Sendable { case low, refilled }

    mutating func tick(at now: Instant) -> Event? {
        guard let deadline, deadline <= now else { return nil }
        switch state {
        case .goingLow:
            state = .low
            return .low
        case .refilling:
            state = .armed
            return .refilled
        case .armed, .low:
            return nil
        }
    }
}
