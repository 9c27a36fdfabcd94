/// What one step of a looping actor's loop did, and what it waits for next (`LoopingActor`). Its `step()`
/// carries out its machine's actions until the machine says wait, and returns that wait; its `run()` is only
/// "step, then wait on the waker for what the step says", until cancelled. Tests drive `step()` themselves on a
/// manual clock: no task runs the loop and nothing sleeps, so a test knows when an actor has done all it had to
/// do.
struct LoopStep<Instant: InstantProtocol>: Sendable {
    /// The step carried out at least one action (a call, a write): what it changed may let another actor, or
    /// this one, do more at the same instant.
    var worked: Bool
    /// The next wake-up without a change; nil: only a change (a ring) wakes the actor.
    var until: Instant?

    static func wait(until: Instant?, worked: Bool) -> Self { .init(worked: worked, until: until) }
}

extension Waker {
    /// Waits for what `step` says: its instant or a ring, or a ring alone.
    func wait<C: Clock>(for step: LoopStep<C.Instant>, clock: C) async where C.Duration == Duration {
        if let until = step.until {
            await wait(until: until, clock: clock)
        } else {
            await wait(timeout: nil, clock: clock)
        }
    }
}
