import Testing

@testable import ReplenishAgent

/// Drives services on a manual clock by their steps (`step()`): no task runs their loops and nothing sleeps, so
/// a test knows when every service has done all that an instant made due. Time moves from one wake-up a service
/// asked for to the next, and every service is stepped again at each (a service woken by another's change, a
/// ring in the daemon, is stepped all the same).
struct StepDriver {
    typealias Instant = ManualClock.Instant
    typealias Step = @Sendable () async -> LoopStep<Instant>

    let clock: ManualClock
    let steps: [Step]

    init(clock: ManualClock, _ steps: Step...) {
        self.clock = clock
        self.steps = steps
    }

    /// Steps every service until none has anything more to do at this instant; returns the earliest instant
    /// one of them waits for (nil: they all wait for a change).
    @discardableResult
    func drain(sourceLocation: SourceLocation = #_sourceLocation) async -> Instant? {
        for _ in 0..<1000 {
            var worked = false
            var earliest: Instant?
            for step in steps {
                let result = await step()
                worked = worked || result.worked
                if let until = result.until { earliest = min(earliest ?? until, until) }
            }
            if !worked { return earliest }
        }
        Issue.record("the services kept working at one instant for 1000 rounds", sourceLocation: sourceLocation)
        return nil
    }

    /// Moves time forward by `duration`, stopping at every instant a service waits for and settling at each.
    func pass(_ duration: Duration, sourceLocation: SourceLocation = #_sourceLocation) async {
        let end = clock.now.advanced(by: duration)
        var stops = 0
        while let next = await drain(sourceLocation: sourceLocation), next <= end {
            stops += 1
            guard next > clock.now, stops < 1_000_000 else {
                Issue.record("a service waits for an instant that has come: \(next)", sourceLocation: sourceLocation)
                return
            }
            clock.advance(by: clock.now.duration(to: next))
        }
        if clock.now < end { clock.advance(by: clock.now.duration(to: end)) }
        await drain(sourceLocation: sourceLocation)
    }
}
