import Testing

@testable import ReplenishAgent

/// The delivery loop's decisions as a pure value (`DeliveryMachine`), every event and every action on instants
/// alone: no clock, no outbox file, no DRS.
@Suite(.tags(.unit)) struct DeliveryMachineTests: OnInstants {
    typealias Machine = DeliveryMachine<ManualClock.Instant>
    func pending(_ slots: String...) -> [PendingSlot] { slots.map { PendingSlot(slot: $0) } }

    @Test func aPendingEntryIsSentAtOnceWhilePairedAndWaitsForAChangeWhileNot() {
        var machine = Machine()
        #expect(machine.next(pending: [], paired: true, at: start) == .wait(until: nil))
        #expect(machine.next(pending: pending("a"), paired: false, at: start) == .wait(until: nil))
        #expect(machine.next(pending: pending("a"), paired: true, at: start) == .send(slot: "a"))
    }

    @Test func anEntryThatMustNotBeSentIsParkedBeforeAnythingIsSentAndOnlyThen() {
        var machine = Machine()
        let stale = PendingSlot(slot: "a", parkReason: "slot no longer configured")
        #expect(machine.next(pending: [stale] + pending("b"), paired: true, at: start) == .park)
        // Unpaired too: a slot no longer configured is parked whatever the pairing.
        #expect(machine.next(pending: [stale], paired: false, at: start) == .park)
        // A look with nothing to park never asks for a park pass.
        #expect(machine.next(pending: pending("b"), paired: true, at: start) == .send(slot: "b"))
        // A failed write comes first: nothing is parked (nor sent) before the outbox is written.
        machine.written(failedRetryingIn: .seconds(5), at: start)
        #expect(machine.next(pending: [stale], paired: true, at: start) == .wait(until: at(5)))
    }

    @Test func eachSlotWaitsForItsOwnRetryNeverSoonerThanTheFloor() {
        var machine = Machine()
        machine.tried("a", .retry(after: .seconds(30)), at: start)
        machine.tried("b", .retry(after: .milliseconds(100)), at: start)
        // b's 100 ms is raised to the floor.
        #expect(machine.next(pending: pending("a", "b"), paired: true, at: start) == .wait(until: at(1)))
        #expect(machine.next(pending: pending("a", "b"), paired: true, at: at(1)) == .send(slot: "b"))
        machine.tried("b", .finished, at: at(1))
        #expect(machine.next(pending: pending("a"), paired: true, at: at(1)) == .wait(until: at(30)))
        #expect(machine.next(pending: pending("a"), paired: true, at: at(30)) == .send(slot: "a"))
    }

    @Test func aFinishedSlotIsDueAtOnceWhenItIsPressedAgain() {
        var machine = Machine()
        machine.tried("a", .retry(after: .seconds(600)), at: start)
        machine.tried("a", .finished, at: at(1))
        #expect(machine.next(pending: pending("a"), paired: true, at: at(1)) == .send(slot: "a"))
    }

    @Test func aFailedWriteHoldsEverySendUntilItsRetryWrites() {
        var machine = Machine()
        machine.written(failedRetryingIn: .seconds(5), at: start)
        #expect(!machine.sendsAtOnce(slot: "a", queued: true, at: start))
        #expect(machine.next(pending: pending("a"), paired: true, at: start) == .wait(until: at(5)))
        #expect(machine.next(pending: pending("a"), paired: true, at: at(5)) == .retryWrite)
        machine.written(failedRetryingIn: nil, at: at(5))
        #expect(machine.next(pending: pending("a"), paired: true, at: at(5)) == .send(slot: "a"))
    }

    /// A failed write reported before a press is (a commit that failed just after the press's write, or before
    /// it): the press does not end the write's retry but has it tried at once (the outbox writes only if behind).
    @Test func aRecordedPressIsDueAtOnceAfterAWriteRetriedAtOnce() {
        var machine = Machine()
        machine.tried("a", .retry(after: .seconds(60)), at: start)
        machine.written(failedRetryingIn: .seconds(5), at: start)
        machine.pressRecorded(slot: "a", queued: true, at: at(1))
        #expect(machine.next(pending: pending("a"), paired: true, at: at(1)) == .retryWrite)
        machine.written(failedRetryingIn: nil, at: at(1))
        #expect(machine.next(pending: pending("a"), paired: true, at: at(1)) == .send(slot: "a"))
        // A press while one is pending is merged into it: its retry instant stays, and its write carries no mark.
        machine.tried("a", .retry(after: .seconds(60)), at: at(1))
        #expect(!machine.sendsAtOnce(slot: "a", queued: false, at: at(2)))
        #expect(machine.sendsAtOnce(slot: "a", queued: true, at: at(2)))
        machine.pressRecorded(slot: "a", queued: false, at: at(2))
        #expect(machine.next(pending: pending("a"), paired: true, at: at(2)) == .wait(until: at(61)))
        #expect(machine.sendsAtOnce(slot: "a", queued: false, at: at(61)))
    }

    @Test func aSlotWithoutATokenIsDueWhenTheTokensChange() {
        var machine = Machine()
        machine.tried("a", .noToken(retryAfter: .seconds(120)), at: start)
        machine.tried("b", .noToken(retryAfter: nil), at: start)
        #expect(machine.next(pending: pending("a", "b"), paired: true, at: at(1)) == .wait(until: at(120)))
        machine.tokensChanged()
        #expect(machine.next(pending: pending("a", "b"), paired: true, at: at(1)) == .send(slot: "a"))
        machine.tried("a", .finished, at: at(1))
        #expect(machine.next(pending: pending("b"), paired: true, at: at(1)) == .send(slot: "b"))
        // Only the slots that waited for tokens are let go by new ones.
        machine.tried("c", .retry(after: .seconds(60)), at: at(1))
        machine.tokensChanged()
        #expect(machine.next(pending: pending("c"), paired: true, at: at(2)) == .wait(until: at(61)))
    }

    /// New tokens that come while a try asks for one (before its `tried`) let the slot go at once, not after the
    /// refresh's backoff.
    @Test func tokensThatChangeWhileATryAsksForOneLetTheSlotGoAtOnce() {
        var machine = Machine()
        #expect(machine.next(pending: pending("a"), paired: true, at: start) == .send(slot: "a"))
        machine.tokensChanged()
        machine.tried("a", .noToken(retryAfter: .seconds(120)), at: start)
        #expect(machine.next(pending: pending("a"), paired: true, at: start) == .send(slot: "a"))
        // No change during this try: it waits for the backoff, or for the next change.
        machine.tried("a", .noToken(retryAfter: .seconds(120)), at: start)
        #expect(machine.next(pending: pending("a"), paired: true, at: start) == .wait(until: at(120)))
        machine.tokensChanged()
        #expect(machine.next(pending: pending("a"), paired: true, at: at(1)) == .send(slot: "a"))
    }

    @Test func anUnpairedSlotWithoutAChangeLooksAgainADayLater() {
        var machine = Machine()
        machine.tried("a", .noToken(retryAfter: nil), at: start)
        #expect(machine.next(pending: pending("a"), paired: true, at: start) == .wait(until: at(24 * 3600)))
    }

    @Test func theWallClockBeingSetMakesEverySlotDueAtOnce() {
        var machine = Machine()
        machine.tried("a", .retry(after: .seconds(600)), at: start)
        machine.clockSet()
        #expect(machine.next(pending: pending("a"), paired: true, at: at(1)) == .send(slot: "a"))
    }

    @Test func anEntryWaitingForTheClockIsSaidOnceAndLookedAtEveryPoll() {
        var machine = Machine()
        let waiting = [PendingSlot(slot: "a", waitsForClock: true)]
        #expect(machine.next(pending: waiting, paired: true, at: start) == .sayWaitingForClock(slots: ["a"]))
        #expect(machine.next(pending: waiting, paired: true, at: start) == .wait(until: at(5)))
        // Another slot's retry sooner than the poll is what the wait ends at; the waiting one is never sent.
        machine.tried("b", .retry(after: .seconds(2)), at: start)
        let both = waiting + pending("b")
        #expect(machine.next(pending: both, paired: true, at: start) == .wait(until: at(2)))
        #expect(machine.next(pending: both, paired: true, at: at(2)) == .send(slot: "b"))
        #expect(machine.next(pending: pending("a"), paired: true, at: at(3)) == .send(slot: "a"))
    }

    @Test func aFactoryResetForgetsEveryWait() {
        var machine = Machine()
        machine.tried("a", .retry(after: .seconds(600)), at: start)
        machine.tried("b", .noToken(retryAfter: nil), at: start)
        machine.written(failedRetryingIn: .seconds(5), at: start)
        machine.wiped()
        #expect(machine.writeRetryAt == nil)
        #expect(machine.next(pending: pending("a", "b"), paired: true, at: start) == .send(slot: "a"))
        // Nothing waits for tokens any more: new tokens change nothing of b's (now absent) wait.
        machine.tried("a", .finished, at: start)
        #expect(machine.next(pending: pending("b"), paired: true, at: start) == .send(slot: "b"))
    }
}
