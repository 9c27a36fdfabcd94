/// One change of an actor's state file at a time, across the awaits of its write: the change is computed from
/// the state as the previous write left it, written (`DiskLane`), and only then the next change starts. An
/// actor is reentrant while it awaits the disk; its turns keep "computed, written, made current" one step.
final class WriteTurns {
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init() {}

    /// Waits for the turn (first come, first served).
    func take(isolation: isolated (any Actor)? = #isolation) async {
        guard busy else {
            busy = true
            return
        }
        await withCheckedContinuation(isolation: isolation) { waiting.append($0) }
    }

    /// Hands the turn to the next waiter, or frees it.
    func release() {
        if waiting.isEmpty { busy = false } else { waiting.removeFirst().resume() }
    }
}
