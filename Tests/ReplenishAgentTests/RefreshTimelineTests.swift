import Testing

@testable import ReplenishAgent

/// The token refresh's timing on instants alone (`RefreshTimeline`): no clock, no LWA, no waiting.
@Suite(.tags(.unit)) struct RefreshTimelineTests: OnInstants {
    typealias Timeline = RefreshTimeline<ManualClock.Instant>

    /// Paired, with the refresh due in `due` seconds of a token of `lifetime` seconds.
    func paired(due: Double, lifetime: Double = 3600) -> Timeline.Facts {
        .init(paired: true, secondsUntilRefresh: due, lifetime: lifetime)
    }
    let unpaired = Timeline.Facts(paired: false, secondsUntilRefresh: 0, lifetime: 0)

    /// A timeline drawing its jitter from a seeded source.
    func fresh(fromDisk: Bool) -> Timeline {
        var random = RandomSource.seeded(state: 1)
        return Timeline(fromDisk: fromDisk, using: &random)
    }

    @Test func unpairedItWaitsForAPairingAndPairedItWaitsForTheRefreshMargin() {
        var timeline = fresh(fromDisk: false)
        #expect(timeline.next(unpaired, at: start) == .waitForPairing)
        #expect(timeline.next(paired(due: 120), at: start) == .wait(until: at(120)))
        #expect(timeline.next(paired(due: 0), at: at(120)) == .refresh(.scheduled))
    }

    @Test func aLongWaitIsCappedSoTheExpiryIsLookedAtAgainAfterASuspendOrAClockStep() {
        var timeline = fresh(fromDisk: false)
        #expect(timeline.next(paired(due: 3000), at: start) == .wait(until: at(300)))
    }

    @Test func aTokenDueAtStartIsRefreshedInTheStartUpWindowOnceAndATenthOfTheLifetimeAtMost() {
        var timeline = fresh(fromDisk: true)
        #expect(timeline.next(paired(due: -10), at: start) == .startupDelay(window: FleetSpread.startupWindow))
        // After the start-up moment (or a change that ended it early), the refresh is due.
        #expect(timeline.next(paired(due: -10), at: at(3)) == .refresh(.scheduled))

        var shortLived = fresh(fromDisk: true)
        #expect(shortLived.next(paired(due: -1, lifetime: 60), at: start) == .startupDelay(window: .seconds(6)))
    }

    @Test func aRefreshDueInLessThanAMillisecondIsWaitedForNotSpunOn() {
        var timeline = fresh(fromDisk: false)
        #expect(timeline.next(paired(due: 0.0004), at: start) == .wait(until: at(0.001)))
    }

    @Test func theStartUpMomentHoldsWhileTheTokenIsDueAndEndsWhenACallerRefreshedIt() {
        var timeline = fresh(fromDisk: true)
        #expect(timeline.next(paired(due: -1), at: start) == .startupDelay(window: FleetSpread.startupWindow))
        timeline.startupWait(until: at(12))
        // Asked again at the same instant or later, it still waits for the moment drawn.
        #expect(timeline.next(paired(due: -1), at: start) == .wait(until: at(12)))
        #expect(timeline.next(paired(due: -1), at: at(11)) == .wait(until: at(12)))
        #expect(timeline.next(paired(due: -1), at: at(12)) == .refresh(.scheduled))
        // A caller that needed a token sooner refreshed it: the normal schedule, not the start-up moment.
        var early = fresh(fromDisk: true)
        _ = early.next(paired(due: -1), at: start)
        early.startupWait(until: at(12))
        #expect(early.next(paired(due: 3000), at: at(1)) == .wait(until: at(301)))
    }

    @Test func noStartUpDelayForATokenThatIsNotDueOrForAPairingMadeSinceTheStart() {
        var notDue = fresh(fromDisk: true)
        #expect(notDue.next(paired(due: 60), at: start) == .wait(until: at(60)))
        #expect(notDue.next(paired(due: 0), at: at(60)) == .refresh(.scheduled))

        var newPairing = fresh(fromDisk: false)
        #expect(newPairing.next(paired(due: 0), at: start) == .refresh(.scheduled))
    }

    @Test func scheduledRefreshesAreAtLeastTheMinimumSpacingApartWhateverTheLifetime() {
        var random = RandomSource.seeded(state: 1)
        var timeline = fresh(fromDisk: false)
        #expect(timeline.next(paired(due: 0, lifetime: 2), at: start) == .refresh(.scheduled))
        timeline.refreshed(.scheduled, at: at(0.5), using: &random)
        // LWA granted 2 s: due again at once by the wall clock, but not before the spacing.
        #expect(timeline.next(paired(due: 0, lifetime: 2), at: at(1)) == .wait(until: at(5.5)))
        #expect(timeline.next(paired(due: 0, lifetime: 2), at: at(5.5)) == .refresh(.scheduled))
    }

    @Test func aFailureClosesTheRetryGateUntilTheBackoffEndsThenRetries() {
        var random = RandomSource.seeded(state: 1)
        var timeline = fresh(fromDisk: false)
        #expect(timeline.next(paired(due: 0), at: start) == .refresh(.scheduled))
        timeline.refreshFailed(at: at(1), backoff: .seconds(30))
        #expect(timeline.retryGate(at: at(1)) == .seconds(30))
        #expect(timeline.retryGate(at: at(21)) == .seconds(10))
        #expect(timeline.next(paired(due: 0), at: at(2)) == .wait(until: at(31)))
        #expect(timeline.next(paired(due: 0), at: at(31)) == .refresh(.retry))
        #expect(timeline.retryGate(at: at(31)) == nil)
        // A retry's success does not start the spacing: only the backoff spaced it.
        timeline.refreshed(.retry, at: at(32), using: &random)
        #expect(timeline.retryGate(at: at(32)) == nil)
        #expect(timeline.next(paired(due: 0), at: at(32)) == .refresh(.scheduled))
    }

    @Test func theWallClockBeingSetEndsTheBackoffAtOnce() {
        var timeline = fresh(fromDisk: false)
        timeline.refreshFailed(at: start, backoff: .seconds(600))
        timeline.clockSet(at: at(5))
        #expect(timeline.retryGate(at: at(5)) == nil)
        #expect(timeline.next(paired(due: 0), at: at(5)) == .refresh(.retry))
        // Without a backoff running, a set clock changes nothing.
        var calm = fresh(fromDisk: false)
        calm.clockSet(at: at(5))
        #expect(calm.next(paired(due: 100), at: at(5)) == .wait(until: at(105)))
    }

    @Test func aFailedWriteIsTriedAgainAtItsTimeBeforeAnythingElseAndEndsAWaitEarly() {
        var timeline = fresh(fromDisk: false)
        timeline.written(failedRetryingIn: .seconds(5), at: start)
        #expect(timeline.writeRetryAt == at(5))
        // The refresh margin is far: the wait ends at the write's retry.
        #expect(timeline.next(paired(due: 200), at: start) == .wait(until: at(5)))
        #expect(timeline.next(paired(due: 195), at: at(5)) == .retryWrite)
        timeline.refreshFailed(at: at(5), backoff: .seconds(60))
        timeline.written(failedRetryingIn: .seconds(10), at: at(5))
        #expect(timeline.next(paired(due: 0), at: at(6)) == .wait(until: at(15)))
        timeline.written(failedRetryingIn: nil, at: at(15))
        #expect(timeline.writeRetryAt == nil)
        #expect(timeline.next(paired(due: 0), at: at(15)) == .wait(until: at(65)))
    }

    @Test func aPairingChangeClearsTheRetryGateAndThePendingWrite() {
        var timeline = fresh(fromDisk: false)
        timeline.refreshFailed(at: start, backoff: .seconds(600))
        timeline.written(failedRetryingIn: .seconds(5), at: start)
        timeline.pairingChanged()
        #expect(timeline.retryGate(at: start) == nil)
        #expect(timeline.writeRetryAt == nil)
        #expect(timeline.next(paired(due: 0), at: start) == .refresh(.scheduled))
    }
}
