import Testing

@testable import ReplenishAgent

/// The order service's timing on instants alone (`OrderTimeline`): no clock, no outbox file, no DRS.
@Suite(.tags(.unit)) struct OrderTimelineTests: OnInstants {
    typealias Timeline = OrderTimeline<ManualClock.Instant>
    func pending(_ slots: String...) -> [Timeline.Pending] { slots.map { Timeline.Pending(slot: $0) } }

    @Test func aPendingEntryIsSentAtOnceWhilePairedAndWaitsForAChangeWhileNot() {
        var timeline = Timeline()
        #expect(timeline.next(pending: [], paired: true, at: start) == .wait(until: nil))
        #expect(timeline.next(pending: pending("a"), paired: false, at: start) == .wait(until: nil))
        #expect(timeline.next(pending: pending("a"), paired: true, at: start) == .send(slot: "a"))
    }

    @Test func eachSlotWaitsForItsOwnRetryNeverSoonerThanTheFloor() {
        var timeline = Timeline()
        timeline.retry("a", after: .seconds(30), at: start)
        timeline.retry("b", after: .milliseconds(100), at: start)
        // b's 100 ms is raised to the README's floor.
        #expect(timeline.next(pending: pending("a", "b"), paired: true, at: start) == .wait(until: at(1)))
        #expect(timeline.next(pending: pending("a", "b"), paired: true, at: at(1)) == .send(slot: "b"))
        timeline.done("b")
        #expect(timeline.next(pending: pending("a"), paired: true, at: at(1)) == .wait(until: at(30)))
        #expect(timeline.next(pending: pending("a"), paired: true, at: at(30)) == .send(slot: "a"))
    }

    @Test func aFailedWriteHoldsEverySendUntilItsRetryWrites() {
        var timeline = Timeline()
        timeline.written(failedRetryingIn: .seconds(5), at: start)
        #expect(timeline.next(pending: pending("a"), paired: true, at: start) == .wait(until: at(5)))
        #expect(timeline.next(pending: pending("a"), paired: true, at: at(5)) == .retryWrite)
        timeline.written(failedRetryingIn: nil, at: at(5))
        #expect(timeline.next(pending: pending("a"), paired: true, at: at(5)) == .send(slot: "a"))
    }

    @Test func anAcceptedPressIsDueAtOnceAndItsWriteEndsAWriteRetry() {
        var timeline = Timeline()
        timeline.retry("a", after: .seconds(60), at: start)
        timeline.written(failedRetryingIn: .seconds(5), at: start)
        timeline.accepted(slot: "a", queued: true)
        #expect(timeline.writeRetryAt == nil)
        #expect(timeline.next(pending: pending("a"), paired: true, at: at(1)) == .send(slot: "a"))
        // A press while one is pending is merged into it: its retry instant stays.
        timeline.retry("a", after: .seconds(60), at: at(1))
        timeline.accepted(slot: "a", queued: false)
        #expect(timeline.next(pending: pending("a"), paired: true, at: at(2)) == .wait(until: at(61)))
    }

    @Test func aSlotWithoutATokenIsDueWhenTheTokensChange() {
        var timeline = Timeline()
        timeline.noToken("a", notPaired: false, at: start)
        timeline.retry("a", after: .seconds(120), at: start)
        timeline.noToken("b", notPaired: true, at: start)
        #expect(timeline.next(pending: pending("a", "b"), paired: true, at: at(1)) == .wait(until: at(120)))
        timeline.tokensChanged()
        #expect(timeline.next(pending: pending("a", "b"), paired: true, at: at(1)) == .send(slot: "a"))
        timeline.done("a")
        #expect(timeline.next(pending: pending("b"), paired: true, at: at(1)) == .send(slot: "b"))
    }

    @Test func anUnpairedSlotWithoutAChangeLooksAgainADayLater() {
        var timeline = Timeline()
        timeline.noToken("a", notPaired: true, at: start)
        #expect(timeline.next(pending: pending("a"), paired: true, at: start) == .wait(until: at(24 * 3600)))
    }

    @Test func theWallClockBeingSetMakesEverySlotDueAtOnce() {
        var timeline = Timeline()
        timeline.retry("a", after: .seconds(600), at: start)
        timeline.clockSet()
        #expect(timeline.next(pending: pending("a"), paired: true, at: at(1)) == .send(slot: "a"))
    }

    @Test func anEntryWaitingForTheClockIsSaidOnceAndLookedAtEveryPoll() {
        var timeline = Timeline()
        let waiting = [Timeline.Pending(slot: "a", waitsForClock: true)]
        #expect(timeline.next(pending: waiting, paired: true, at: start) == .sayWaitingForClock(slots: ["a"]))
        #expect(timeline.next(pending: waiting, paired: true, at: start) == .wait(until: at(5)))
        // Another slot's retry sooner than the poll is what the wait ends at; the waiting one is never sent.
        timeline.retry("b", after: .seconds(2), at: start)
        let both = waiting + pending("b")
        #expect(timeline.next(pending: both, paired: true, at: start) == .wait(until: at(2)))
        #expect(timeline.next(pending: both, paired: true, at: at(2)) == .send(slot: "b"))
        #expect(timeline.next(pending: pending("a"), paired: true, at: at(3)) == .send(slot: "a"))
    }

    @Test func aFactoryResetForgetsEveryWait() {
        var timeline = Timeline()
        timeline.retry("a", after: .seconds(600), at: start)
        timeline.noToken("b", notPaired: true, at: start)
        timeline.written(failedRetryingIn: .seconds(5), at: start)
        timeline.wiped()
        #expect(timeline.writeRetryAt == nil)
        #expect(timeline.next(pending: pending("a", "b"), paired: true, at: start) == .send(slot: "a"))
    }
}
