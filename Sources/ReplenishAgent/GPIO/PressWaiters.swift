import Synchronization

/// The control socket's requests waiting for the outcome of a press they made: a request registers (`add`) before
/// it presses, its edges carry the id (`InputEdge.request`), and the press they start is answered to it alone
/// (`InputPipeline` says it was recognised and gives the handler's outcome, through `PressRequests`). Each is answered once: with its own
/// press's outcome, a failure when its wait ran out (`PressWait`), or a failure when its caller is cancelled (the
/// agent stopping). An answer that comes before the request waits for it is kept until it does. `ControlServer`
/// adds the waiters and waits.
///
/// A lock rather than an actor: the answers come from the handler's task, the wait's timer and a cancellation
/// handler, none of which need to hop onto an actor to give one.
final class PressWaiters: Sendable {
    typealias Outcome = Result<String, AgentError>

    private struct Waiter {
        let id: Int
        /// A press was recognised for this waiter and handed to the handler.
        var recognised = false
        var result: Outcome?
        var continuation: CheckedContinuation<Outcome, Never>?
    }

    private let state = Mutex<(waiters: [Waiter], nextID: Int)>(([], 0))

    /// A new waiter, registered before its request presses (so the outcome cannot be missed); its id goes on the
    /// request's edges (`InputEdge.request`). Collect the outcome with `outcome(of:timeout:clock:)`, or `forget`
    /// the id when the request ends without it.
    func add() -> Int {
        state.withLock { state in
            state.nextID += 1
            state.waiters.append(Waiter(id: state.nextID))
            return state.nextID
        }
    }

    /// Drops waiter `id`: its request ended without the outcome (the client went away, the agent stops; a wait under
    /// way is answered with a failure). Its press, if one is recognised later, is handled all the same and answered
    /// to no one, never to the next request's wait.
    func forget(_ id: Int) {
        let waiting = state.withLock { state -> CheckedContinuation<Outcome, Never>? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index).continuation
        }
        waiting?.resume(returning: .failure(AgentError(.invalidInput, "the press's request ended")))
    }

    /// Marks waiter `id`'s press as recognised (it now waits for the handler's outcome, not for a press); false
    /// when no such waiter waits any more (its press is answered to no one).
    @discardableResult
    func recognised(_ id: Int) -> Bool {
        state.withLock { state in
            guard let index = state.waiters.firstIndex(where: { $0.id == id && $0.result == nil }) else {
                return false
            }
            state.waiters[index].recognised = true
            return true
        }
    }

    func isRecognised(_ id: Int) -> Bool {
        state.withLock { $0.waiters.first { $0.id == id }?.recognised ?? false }
    }

    /// Whether waiter `id` is waiting for its answer now (for tests).
    func isParked(_ id: Int) -> Bool {
        state.withLock { $0.waiters.first { $0.id == id }?.continuation != nil }
    }

    /// Answers waiter `id`, once: a second answer, or one for a waiter gone, is dropped.
    func finish(_ id: Int, with outcome: Outcome) {
        let waiting = state.withLock { state -> CheckedContinuation<Outcome, Never>? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }), state.waiters[index].result == nil
            else { return nil }
            guard let continuation = state.waiters[index].continuation else {
                state.waiters[index].result = outcome
                return nil
            }
            state.waiters.remove(at: index)
            return continuation
        }
        waiting?.resume(returning: outcome)
    }

    /// Waits for waiter `id`'s answer (nil: no such waiter). A cancelled caller is answered at once with a
    /// failure.
    func outcome(of id: Int) async -> Outcome? {
        let known = state.withLock { state -> (known: Bool, result: Outcome?) in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return (false, nil) }
            guard let result = state.waiters[index].result else { return (true, nil) }
            state.waiters.remove(at: index)
            return (true, result)
        }
        guard known.known else { return nil }
        if let result = known.result { return result }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                // An answer given meanwhile (the cancellation's, the handler's) is kept as the result: take it.
                let ready = state.withLock { state -> Outcome? in
                    guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                        return .failure(AgentError(.invalidInput, "unknown press"))
                    }
                    guard let result = state.waiters[index].result else {
                        state.waiters[index].continuation = continuation
                        return nil
                    }
                    state.waiters.remove(at: index)
                    return result
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            finish(id, with: .failure(AgentError(.server, "the agent is stopping")))
        }
    }

    /// The outcome of the press registered as `id`. A failure when no press was recognised within `timeout` on
    /// `clock`; once one is, the handler's own outcome, however long its DRS calls take (up to
    /// `PressWait.outcomeLimit`). Ends at once, with a failure, when the caller is cancelled (the agent stopping).
    func outcome<C: Clock>(of id: Int, timeout: Duration, clock: C) async -> Outcome where C.Duration == Duration {
        let startedAt = clock.now
        return await withTaskGroup { timer in
            // The wait's timer, a child of this call: it answers the waiter when the wait runs out, and ends with
            // the call.
            timer.addTask {
                var wait = PressWait(startedAt: startedAt, timeout: timeout)
                while true {
                    switch wait.next(recognised: self.isRecognised(id), at: clock.now) {
                    case .wait(let until):
                        do { try await clock.loopSleep(until: until) } catch { return }
                    case .notRecognised:
                        let failure = AgentError(.invalidInput, "no press was recognised within \(timeout)")
                        return self.finish(id, with: .failure(failure))
                    case .outcomeUnknown:
                        let failure = AgentError(
                            .server,
                            "the press was recognised; its outcome is not known yet (DRS is slow to answer): see replenish-agent status"
                        )
                        return self.finish(id, with: .failure(failure))
                    }
                }
            }
            let outcome = await outcome(of: id)
            timer.cancelAll()
            return outcome ?? .failure(AgentError(.invalidInput, "unknown press"))
        }
    }
}

/// Where the input pipeline says what became of a press a request made (`InputEdge.request`): the control
/// socket's `PressWaiters`. The pipeline holds no waiter; it only passes the request's id back.
protocol PressRequests: Sendable {
    /// The request's press was recognised and goes to the handler; false when no one waits for it any more.
    @discardableResult func recognised(_ id: Int) -> Bool
    /// The handler's outcome of the request's press.
    func finish(_ id: Int, with outcome: PressWaiters.Outcome)
}

extension PressWaiters: PressRequests {}
