import Testing

@testable import ReplenishAgent

/// The duties' timing on instants alone (`DutyTimeline`): no clock, no service, no waiting.
@Suite(.tags(.unit)) struct DutyTimelineTests: OnInstants {

    func waitUntil(_ action: DutyTimeline<Instant>.Action) -> Instant? {
        if case .wait(let until) = action { return until }
        return nil
    }

    let report1 = SlotStatusReport(
        remaining: 1, original: 4, lastUse: 1_800_000_000, expectedReplenishment: 1_800_090_000)
    let report2 = SlotStatusReport(
        remaining: 0, original: 4, lastUse: 1_800_000_100, expectedReplenishment: 1_800_000_100)

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func theFirstDutiesLandInTheStartUpWindowThenDaily(seed: UInt64) throws {
        var timeline = DutyTimeline(startedAt: start, random: .seeded(state: seed))
        let first = try #require(waitUntil(timeline.next(at: start, paired: true, clockTrusted: true)))
        #expect(first >= start && first <= start.advanced(by: FleetSpread.startupWindow))
        #expect(timeline.next(at: first, paired: true, clockTrusted: true) == .performDuties)
        timeline.dutiesDone(at: first)
        let second = try #require(waitUntil(timeline.next(at: first, paired: true, clockTrusted: true)))
        let day = first.duration(to: second)
        #expect(day >= .seconds(24 * 3600) - FleetSpread.dailyJitter)
        #expect(day <= .seconds(24 * 3600) + FleetSpread.dailyJitter)
    }

    @Test func unpairedNothingIsDueAndANewPairingMakesTheDutiesDueAtOnce() {
        var timeline = DutyTimeline(startedAt: start, random: .seeded(state: 7))
        #expect(timeline.next(at: start, paired: false, clockTrusted: true) == .waitForPairing)
        timeline.pairingChanged()
        #expect(timeline.next(at: start, paired: true, clockTrusted: true) == .performDuties)
    }

    @Test func anUnsetClockIsLookedAtEveryTwoSecondsSaidOnceThenTheDutiesAreDueAtOnce() {
        var timeline = DutyTimeline(startedAt: start, random: .seeded(state: 7))
        timeline.dutiesDone(at: start)
        #expect(
            timeline.next(at: at(10), paired: true, clockTrusted: false)
                == .waitForClock(until: at(12), firstTime: true))
        #expect(
            timeline.next(at: at(12), paired: true, clockTrusted: false)
                == .waitForClock(until: at(14), firstTime: false))
        #expect(timeline.next(at: at(14), paired: true, clockTrusted: true) == .clockSet)
        // Due at once, not a day after the last duties.
        #expect(timeline.next(at: at(14), paired: true, clockTrusted: true) == .performDuties)
    }

    @Test func aFailureRetriesOnTheBackoffAndNeverBeforeRetryAfter() throws {
        var timeline = DutyTimeline(startedAt: start, random: .seeded(state: 3))
        let first = timeline.dutiesFailed(AgentError(.server, "deviceStatus answered 503"), at: start)
        #expect(first >= Backoff.duties.minimum(attempt: 1) && first <= Backoff.duties.ceiling(attempt: 1))
        #expect(waitUntil(timeline.next(at: start, paired: true, clockTrusted: true)) == start.advanced(by: first))
        let retryAt = start.advanced(by: first)
        let asked = timeline.dutiesFailed(
            AgentError(.server, "deviceStatus answered 503", retryAfter: .seconds(600)), at: retryAt)
        #expect(asked == .seconds(600))
        #expect(waitUntil(timeline.next(at: retryAt, paired: true, clockTrusted: true)) == retryAt.advanced(by: asked))
        #expect(timeline.next(at: retryAt.advanced(by: asked), paired: true, clockTrusted: true) == .performDuties)
    }

    @Test func reportsGoFirstTheNewestPerSlotWithABackoffOfTheirOwn() throws {
        var timeline = DutyTimeline(startedAt: start, random: .seeded(state: 5))
        timeline.dutiesDone(at: start)
        timeline.queueReport(slot: "slot-1", report: report1)
        timeline.queueReport(slot: "slot-2", report: report1)
        timeline.queueReport(slot: "slot-1", report: report2)
        // slot-1's newer report replaced its older one and went to the back.
        #expect(
            timeline.next(at: at(1), paired: true, clockTrusted: true) == .sendReport(slot: "slot-2", report: report1))
        let delay = timeline.reportFailed(AgentError(.network, "no route"), at: at(1))
        let retry = at(1).advanced(by: delay)
        // Waiting for the report's retry, which comes before the next day's duties.
        #expect(waitUntil(timeline.next(at: at(1), paired: true, clockTrusted: true)) == retry)
        #expect(
            timeline.next(at: retry, paired: true, clockTrusted: true) == .sendReport(slot: "slot-2", report: report1))
        timeline.reportSent(slot: "slot-2", report: report1)
        #expect(
            timeline.next(at: retry, paired: true, clockTrusted: true) == .sendReport(slot: "slot-1", report: report2))
        timeline.reportSent(slot: "slot-1", report: report2)
        let daily = try #require(waitUntil(timeline.next(at: retry, paired: true, clockTrusted: true)))
        #expect(daily > start.advanced(by: .seconds(23 * 3600)))
    }

    @Test func anUnsetWallClockIsLookedAtEveryTwoSecondsUntilItIsSetAndThenNeverAgain() {
        func at(_ seconds: Int) -> Instant { Instant(offset: .seconds(seconds)) }
        var trusted = WallClockWait<Instant>()
        #expect(trusted.next(trusted: true, at: at(0)) == .idle)
        #expect(trusted.next(trusted: false, at: at(5)) == .idle)

        var unset = WallClockWait<Instant>()
        #expect(unset.next(trusted: false, at: at(0)) == .sayWaiting)
        #expect(unset.next(trusted: false, at: at(0)) == .look(until: at(2)))
        #expect(unset.next(trusted: false, at: at(2)) == .look(until: at(4)))
        #expect(unset.next(trusted: true, at: at(4)) == .clockSet)
        #expect(unset.next(trusted: true, at: at(6)) == .idle)
    }
}
