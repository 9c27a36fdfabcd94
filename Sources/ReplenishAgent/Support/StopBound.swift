import Synchronization

/// How long a stop waits for a flash write under way that may be given up (`DiskLane.write`'s `boundedAtStop`,
/// the outbox and the status record): until `wait` after the stop began. SIGTERM or SIGINT begins it
/// (`Agent.runGroup`), so every such write of one stop meets the same deadline, however late its caller is
/// cancelled in the parts' reverse order; a caller cancelled without a signal (a part that failed) waits `wait`
/// from its own cancellation. 8 s leaves the parts after it 2 s of the stop's 10 (`docs/behaviour.md`).
final class StopBound: Sendable {
    /// The daemon's stop.
    static let daemon = StopBound(wait: .seconds(8))

    let wait: Duration
    private let began = Mutex<ContinuousClock.Instant?>(nil)

    init(wait: Duration) { self.wait = wait }

    /// The stop begins at `now`; a later call changes nothing.
    func begin(at now: ContinuousClock.Instant = .now) {
        began.withLock { if $0 == nil { $0 = now } }
    }

    /// When a caller cancelled at `now` stops waiting for a write that has not reached its rename.
    func deadline(cancelledAt now: ContinuousClock.Instant = .now) -> ContinuousClock.Instant {
        (began.withLock { $0 } ?? now) + wait
    }
}
