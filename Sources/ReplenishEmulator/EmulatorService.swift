import Foundation

/// The shared, thread-safe owner of the `EmulatorState`: every connection's handler calls `dispatch`.
final class EmulatorService: Sendable {
    private let lock = NSLock()
    // Only touched with `lock` held.
    nonisolated(unsafe) private var state: EmulatorState

    init(config: EmulatorConfig) {
        self.state = EmulatorState(config: config)
    }

    /// Decides what happens to one request (a fault, or the normal answer) against the current state, at the
    /// current wall-clock time.
    func dispatch(_ request: EmulatorRequest) -> EmulatorDisposition {
        lock.lock()
        defer { lock.unlock() }
        return state.dispatch(request, now: Date())
    }

    /// Counts one accepted TCP connection (tests check that a client keeps its connection alive) and returns
    /// its number (from 1).
    func connectionAccepted() -> Int {
        lock.lock()
        defer { lock.unlock() }
        state.stats.connectionsAccepted += 1
        return state.stats.connectionsAccepted
    }

    /// Whether connections are closed right after each answer (`serve --close-after-answer`).
    var closeAfterAnswer: Bool {
        lock.lock()
        defer { lock.unlock() }
        return state.config.closeAfterAnswer
    }

    /// The normal handling of a request whose injected delay has run out.
    func resumeDelayed(_ request: EmulatorRequest) -> EmulatorDisposition {
        lock.lock()
        defer { lock.unlock() }
        return state.resumeDelayed(request, now: Date())
    }

    /// Answers `413` for a request whose body was over the limit (and discarded), recording the refusal.
    func refuseTooLarge(_ request: EmulatorRequest) -> EmulatorResponse {
        lock.lock()
        defer { lock.unlock() }
        return state.refuseTooLarge(request, now: Date())
    }
}
