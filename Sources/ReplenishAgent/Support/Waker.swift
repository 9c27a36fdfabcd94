import Synchronization

/// Wakes one waiting service loop early: a service sleeps until its next deadline or until something it
/// cares about changed (a new press, new tokens), whichever comes first. A ring that arrives while nobody
/// waits is kept, so the next wait returns at once and no change is missed.
final class Waker: Sendable {
    private struct State {
        var rung = false
        var continuation: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    init() {}

    /// Wakes the waiter, or the next one to wait.
    func ring() {
        let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if let continuation = state.continuation {
                state.continuation = nil
                return continuation
            }
            state.rung = true
            return nil
        }
        continuation?.resume()
    }

    /// Returns when rung, when `timeout` (if any) has passed on `clock`, or when the task is cancelled.
    func wait<C: Clock>(timeout: Duration?, clock: C) async where C.Duration == Duration {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitForRing() }
            if let timeout {
                group.addTask { try? await clock.sleep(for: timeout) }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Returns when rung, when `deadline` has come on `clock`, or when the task is cancelled.
    func wait<C: Clock>(until deadline: C.Instant, clock: C) async where C.Duration == Duration {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitForRing() }
            group.addTask { try? await clock.sleep(until: deadline, tolerance: nil) }
            await group.next()
            group.cancelAll()
        }
    }

    private func waitForRing() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.rung || Task.isCancelled {
                        state.rung = false
                        return true
                    }
                    state.continuation = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.continuation = nil }
                return state.continuation
            }
            continuation?.resume()
        }
    }
}
