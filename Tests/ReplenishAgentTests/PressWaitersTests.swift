import Testing

@testable import ReplenishAgent

/// The control socket's waits for a press's outcome: each answered once, by its own answer, whatever comes
/// first (the answer, the caller's cancellation, the request ending).
@Suite(.tags(.unit)) struct PressWaitersTests {
    @Test func anAnswerGivenBeforeTheWaitIsKeptForIt() async throws {
        let waiters = PressWaiters()
        let id = waiters.add()
        #expect(waiters.recognised(id))
        #expect(waiters.isRecognised(id))
        waiters.finish(id, with: .success("ordered"))
        waiters.finish(id, with: .success("a second answer"))
        #expect(try await waiters.outcome(of: id)?.get() == "ordered")
        // Taken once: the waiter is gone.
        #expect(await waiters.outcome(of: id) == nil)
        #expect(!waiters.recognised(id))
    }

    @Test func aWaitUnderWayIsAnsweredByItsOwnAnswerOnly() async throws {
        let waiters = PressWaiters()
        let first = waiters.add()
        let second = waiters.add()
        let waiting = Task { await waiters.outcome(of: second) }
        #expect(await parked(second, in: waiters))
        waiters.finish(first, with: .success("the first's"))
        waiters.finish(second, with: .success("the second's"))
        #expect(try await waiting.value?.get() == "the second's")
        #expect(try await waiters.outcome(of: first)?.get() == "the first's")
    }

    @Test func aCancelledWaitEndsWithAFailure() async {
        let waiters = PressWaiters()
        let id = waiters.add()
        let waiting = Task { await waiters.outcome(of: id) }
        waiting.cancel()
        guard case .failure(let error) = await waiting.value else {
            Issue.record("a cancelled wait must end with a failure")
            return
        }
        #expect(error.message == "the agent is stopping")
        // The press's own answer, later, goes to no one.
        waiters.finish(id, with: .success("ordered"))
        #expect(await waiters.outcome(of: id) == nil)
    }

    @Test func aForgottenWaiterIsAnsweredAndItsPressGoesToNoOne() async {
        let waiters = PressWaiters()
        let id = waiters.add()
        let waiting = Task { await waiters.outcome(of: id) }
        #expect(await parked(id, in: waiters))
        waiters.forget(id)
        guard case .failure = await waiting.value else {
            Issue.record("a forgotten wait must end with a failure")
            return
        }
        #expect(!waiters.recognised(id))
        waiters.finish(id, with: .success("ordered"))
        #expect(await waiters.outcome(of: id) == nil)
    }

    /// Whether waiter `id`'s wait is parked within a bounded number of turns.
    private func parked(_ id: Int, in waiters: PressWaiters) async -> Bool {
        for _ in 0..<10_000 {
            if waiters.isParked(id) { return true }
            await Task.yield()
        }
        return false
    }
}
