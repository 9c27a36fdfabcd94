import NIOCore
import Synchronization

/// Wakes one waiting service loop early: a service sleeps until its next deadline or until something it
/// cares about changed (a new press, new tokens), whichever comes first. A ring that arrives while nobody
/// waits is kept, so the next wait returns at once and no change is missed.
final class Waker: Sendable {
    private struct State {
        var rung = false
        var continuation: CheckedContinuation<Void, Never>?
        /// Counts timed waits, so that a timer that fires after its wait ended wakes no later wait.
        var generation: UInt64 = 0
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
        if let timeout, clock is ContinuousClock, let loop = LoopTaskExecutor.installed {
            return await waitForRing(orAfter: timeout, on: loop)
        }
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
        if clock is ContinuousClock, let loop = LoopTaskExecutor.installed {
            return await waitForRing(orAfter: clock.now.duration(to: deadline), on: loop)
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitForRing() }
            group.addTask { try? await clock.sleep(until: deadline, tolerance: nil) }
            await group.next()
            group.cancelAll()
        }
    }

    /// `waitForRing` with a timer on the event loop that is cancelled as soon as the wait ends. A sleeping child
    /// task, cancelled when a ring comes first, would leave its timer scheduled until its deadline (hours for
    /// the daily duties): one per early ring, which a busy agent would pile up (measured: 6 MB over 10,000
    /// orders, `scripts/bench.sh`). Only for `ContinuousClock` on the agent's loop (`LoopExecutor`).
    private func waitForRing(orAfter timeout: Duration, on loop: LoopTaskExecutor) async {
        guard timeout > .zero else { return }
        let generation = state.withLock { state -> UInt64 in
            state.generation &+= 1
            return state.generation
        }
        let timer = loop.schedule(after: timeout) { [self] in
            let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard state.generation == generation else { return nil }
                // Not waiting yet (the timer beat the wait to its continuation): the wait returns at once, as
                // after a ring; callers re-check their deadlines, so an early return costs one loop.
                guard let continuation = state.continuation else {
                    state.rung = true
                    return nil
                }
                state.continuation = nil
                return continuation
            }
            continuation?.resume()
        }
        await waitForRing()
        timer.cancel()
    }

    private func waitForRing() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.rung {
                        state.rung = false
                        return true
                    }
                    // A wait cancelled before it began (its timer came first) leaves a ring that came meanwhile
                    // for the next wait.
                    if Task.isCancelled { return true }
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

extension Clock where Duration == Swift.Duration {
    /// `sleep(for:)` for the agent's services: on the agent's loop (`LoopExecutor`) a `ContinuousClock` sleep is
    /// a timer of the loop. Swift 6.2's runtime gives every `Task.sleep` and `clock.sleep` to libdispatch's
    /// `dispatch_after`, past the delay and deadline hooks (seen with gdb on the arm64 build's compiler), and
    /// libdispatch then keeps a thread that wakes once a second for ever; 6.3 asks the loop (`LoopTaskExecutor`).
    /// Throws `CancellationError` when the task is cancelled, as `sleep(for:)` does.
    func loopSleep(for duration: Duration) async throws {
        guard self is ContinuousClock, LoopTaskExecutor.installed != nil else {
            return try await sleep(for: duration)
        }
        await Waker().wait(timeout: duration, clock: self)
        try Task.checkCancellation()
    }

    /// `sleep(until:tolerance:)` likewise.
    func loopSleep(until deadline: Instant) async throws {
        guard self is ContinuousClock, LoopTaskExecutor.installed != nil else {
            return try await sleep(until: deadline, tolerance: nil)
        }
        await Waker().wait(until: deadline, clock: self)
        try Task.checkCancellation()
    }
}
