import Foundation

/// The shared, thread-safe owner of the `EmulatorState`: every connection's handler calls `dispatch`.
final class EmulatorService: Sendable {
    private let lock = NSLock()
    // Only touched with `lock` held.
    nonisolated(unsafe) private var state: EmulatorState

    /// With `stateFile`, the state is read from it at start and written to it (durably) after every request
    /// that is not an admin `GET`, before the answer goes out.
    private let stateFile: String?

    init(config: EmulatorConfig, stateFile: String? = nil) throws {
        var state = EmulatorState(config: config)
        if let stateFile, let snapshot = try EmulatorSnapshot.load(from: stateFile) {
            snapshot.restore(into: &state)
        }
        self.state = state
        self.stateFile = stateFile
    }

    /// Saves the state after `request` when a state file is kept; a failure is printed, never fatal.
    private func persist(after request: EmulatorRequest) {
        guard let stateFile, !(request.method == "GET" && request.path.hasPrefix("/admin/")) else { return }
        do {
            try EmulatorSnapshot(of: state).save(to: stateFile)
        } catch {
            FileHandle.standardError.write(Data("emulator: \(error)\n".utf8))
        }
    }

    /// Lets `answer` change the state for `request` with the lock held, then saves the state (`persist`).
    private func handle<Answer>(_ request: EmulatorRequest, _ answer: (inout EmulatorState) -> Answer) -> Answer {
        lock.lock()
        defer { lock.unlock() }
        let result = answer(&state)
        persist(after: request)
        return result
    }

    /// Decides what happens to one request (a fault, or the normal answer) against the current state, at the
    /// current wall-clock time.
    func dispatch(_ request: EmulatorRequest) -> EmulatorDisposition {
        handle(request) { $0.dispatch(request, now: Date()) }
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
        handle(request) { $0.resumeDelayed(request, now: Date()) }
    }

    /// Answers `413` for a request whose body was over the limit (and discarded), recording the refusal.
    func refuseTooLarge(_ request: EmulatorRequest) -> EmulatorResponse {
        handle(request) { $0.refuseTooLarge(request, now: Date()) }
    }
}
