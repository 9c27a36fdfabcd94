import Testing

@testable import ReplenishAgent

/// The timing of the follow-up of open orders, of a queued deregistration and of a press's re-check, on
/// instants alone (`FollowUpTimeline`, `DeregistrationTimeline`, `PressRecheckLimit`): no clock, no DRS.
@Suite(.tags(.unit)) struct FollowUpTimelineTests: OnInstants {

    func followUpWait(_ action: FollowUpTimeline<Instant>.Action) -> Instant? {
        if case .wait(let until) = action { return until }
        return nil
    }

    @Test(arguments: [AgentConfig.Phase.test, .production])
    func anOpenOrderIsAskedAboutAtThePhasesCadenceUntilItIsFinal(phase: AgentConfig.Phase) throws {
        var timeline = FollowUpTimeline<Instant>(phase: phase, random: .seeded(state: 3))
        let (low, high): (Double, Double) = phase == .production ? (5 * 3600, 7 * 3600) : (120, 180)
        #expect(timeline.next(paired: true, open: [], at: start) == .waitForChange)
        let first = try #require(followUpWait(timeline.next(paired: true, open: ["a"], at: start)))
        #expect(first >= at(low) && first <= at(high))
        #expect(timeline.next(paired: true, open: ["a"], at: first) == .check(slot: "a"))
        timeline.answered(slot: "a", open: true, at: first)
        let second = try #require(followUpWait(timeline.next(paired: true, open: ["a"], at: first)))
        #expect(first.duration(to: second) >= .seconds(low) && first.duration(to: second) <= .seconds(high))
        timeline.answered(slot: "a", open: false, at: second)
        // Final: nothing asked, even while the record still says open until it is written.
        #expect(timeline.next(paired: true, open: [], at: second) == .waitForChange)
    }

    @Test func unpairedNothingIsAskedAndAClosedOrderIsForgotten() throws {
        var timeline = FollowUpTimeline<Instant>(phase: .test, random: .seeded(state: 1))
        #expect(timeline.next(paired: false, open: ["a"], at: start) == .waitForChange)
        _ = try #require(followUpWait(timeline.next(paired: true, open: ["a"], at: start)))
        #expect(timeline.next(paired: true, open: [], at: at(500)) == .waitForChange)
    }

    @Test func aFailureRetriesOnTheBackoffNeverSoonerThanRetryAfter() throws {
        var timeline = FollowUpTimeline<Instant>(phase: .test, random: .seeded(state: 2))
        let first = try #require(followUpWait(timeline.next(paired: true, open: ["a"], at: start)))
        let delay = timeline.failed(
            slot: "a", error: AgentError(.server, "503", retryAfter: .seconds(900)), at: first)
        #expect(delay >= .seconds(900))
        #expect(timeline.next(paired: true, open: ["a"], at: first) == .wait(until: first.advanced(by: delay)))
        #expect(timeline.next(paired: true, open: ["a"], at: first.advanced(by: delay)) == .check(slot: "a"))
    }

    @Test func aRecheckAsksAtMostOnceAMinutePerKeyAndRemembersWhatItFound() {
        var spacing = PressRecheckLimit<Instant, String, Bool>()
        guard case .ask = spacing.decide("order-1", at: start) else { return #expect(Bool(false)) }
        // Within the minute, before an answer: nothing known.
        guard case .askedRecently(nil) = spacing.decide("order-1", at: at(10)) else { return #expect(Bool(false)) }
        spacing.record(true)
        guard case .askedRecently(true?) = spacing.decide("order-1", at: at(59)) else {
            return #expect(Bool(false))
        }
        // A newer order of the slot is asked about at once; the minute is over for the first at 60 s.
        guard case .ask = spacing.decide("order-2", at: at(59.5)) else { return #expect(Bool(false)) }
        guard case .ask = spacing.decide("order-2", at: at(119.5)) else { return #expect(Bool(false)) }
    }

    @Test func aQueuedDeregistrationWaitsForItsCallerThenTriesOnItsOwn() {
        var timeline = DeregistrationTimeline<Instant>()
        #expect(timeline.next(queued: false, at: start) == .waitForChange)
        timeline.enqueued(at: start)
        #expect(timeline.next(queued: true, at: start) == .wait(until: at(30)))
        // The caller may try at once, within its grace.
        #expect(timeline.callerTry(at: at(1)) == .attempt)
        #expect(timeline.next(queued: true, at: at(30)) == .attempt)
    }

    /// The start's reset of a pairing made for another identity queues the call and leaves it to the queue
    /// (#29.4): no grace to wait out; a backoff after a failure still holds.
    @Test func aCallerThatGivesItsTryUpLetsTheQueueTryAtOnce() {
        var timeline = DeregistrationTimeline<Instant>()
        timeline.enqueued(at: start)
        timeline.callerWillNotTry()
        #expect(timeline.next(queued: true, at: start) == .attempt)
        timeline.started()
        timeline.failed(at: at(1), backoff: .seconds(5))
        timeline.callerWillNotTry()
        #expect(timeline.next(queued: true, at: at(2)) == .wait(until: at(6)))
    }

    @Test func aDeregistrationIsNeverTriedTwiceAtOnceNorInsideItsBackoff() {
        var timeline = DeregistrationTimeline<Instant>()
        timeline.enqueued(at: start)
        timeline.started()
        #expect(timeline.callerTry(at: start) == .busy)
        #expect(timeline.next(queued: true, at: at(40)) == .waitForChange)
        timeline.failed(at: at(1), backoff: .milliseconds(100))
        #expect(timeline.failures == 1)
        // The backoff is never below the 1 s floor, for the queue and for a caller alike.
        #expect(timeline.callerTry(at: at(1.5)) == .backingOff)
        #expect(timeline.next(queued: true, at: at(1.5)) == .wait(until: at(2)))
        #expect(timeline.callerTry(at: at(2)) == .attempt)
        timeline.started()
        timeline.succeeded()
        #expect(timeline.failures == 0)
        #expect(timeline.next(queued: false, at: at(2)) == .waitForChange)
    }
}
