/// The control socket's requests waiting for the outcome of the press they cause (`InputPipeline.expectPress`,
/// `outcome(of:timeout:)`): each request's own press, never another request's on the same input. A value the
/// pipeline owns; it resumes a waiting request, it never waits itself.
struct PressWaiters {
    typealias Outcome = Result<String, AgentError>

    private struct Waiter {
        let id: Int
        /// A press was recognised for this waiter and handed to the handler.
        var recognised = false
        var result: Outcome?
        var continuation: CheckedContinuation<Outcome, Never>?
    }

    private var waiters: [Waiter] = []
    private var nextID = 0

    /// A new waiter; its id goes on the request's edges (`InputEdge.request`).
    mutating func expect() -> Int {
        nextID += 1
        waiters.append(Waiter(id: nextID))
        return nextID
    }

    /// Drops the waiter `id` (its request ended): its press, if one is recognised later, is answered to no one.
    mutating func forget(_ id: Int) { waiters.removeAll { $0.id == id } }

    func contains(_ id: Int) -> Bool { waiters.contains { $0.id == id } }

    func isRecognised(_ id: Int) -> Bool { waiters.first { $0.id == id }?.recognised ?? false }

    /// The press of request `id` was recognised and handed to the handler: from now on its wait is for the
    /// handler's outcome. Nothing when the request no longer waits (it went away, or was answered).
    mutating func recognised(_ id: Int) {
        if let index = waiters.firstIndex(where: { $0.id == id && $0.result == nil }) {
            waiters[index].recognised = true
        }
    }

    /// The outcome of `id` if it came before its request asked for it (the waiter is then gone).
    mutating func takeResult(_ id: Int) -> Outcome? {
        guard let index = waiters.firstIndex(where: { $0.id == id }), let result = waiters[index].result else {
            return nil
        }
        waiters.remove(at: index)
        return result
    }

    /// The request `id` waits on `continuation` for its outcome.
    mutating func wait(_ id: Int, on continuation: CheckedContinuation<Outcome, Never>) {
        if let index = waiters.firstIndex(where: { $0.id == id }) { waiters[index].continuation = continuation }
    }

    /// Answers `id` with `outcome`: resumes its request if it waits, keeps the outcome for it otherwise. The first
    /// outcome wins; a later one (the timer's, after the handler's) is dropped.
    mutating func finish(_ id: Int, with outcome: Outcome) {
        guard let index = waiters.firstIndex(where: { $0.id == id }), waiters[index].result == nil else { return }
        if let continuation = waiters[index].continuation {
            waiters.remove(at: index)
            continuation.resume(returning: outcome)
        } else {
            waiters[index].result = outcome
        }
    }
}
