import Foundation

/// The shared, thread-safe owner of the `EmulatorState`: every connection's handler calls `answer`.
final class EmulatorService: Sendable {
    private let lock = NSLock()
    // Only touched with `lock` held.
    nonisolated(unsafe) private var state: EmulatorState

    init(config: EmulatorConfig) {
        self.state = EmulatorState(config: config)
    }

    /// Answers one request against the current state, at the current wall-clock time.
    func answer(_ request: EmulatorRequest) -> EmulatorResponse {
        lock.lock()
        defer { lock.unlock() }
        return state.handle(request, now: Date())
    }

    /// Answers `413` for a request whose body was over the limit (and discarded), recording the refusal.
    func refuseTooLarge(_ request: EmulatorRequest) -> EmulatorResponse {
        lock.lock()
        defer { lock.unlock() }
        return state.refuseTooLarge(request)
    }
}
