import Testing

@testable import ReplenishAgent

/// The LED's timing on instants alone (`LightTimeline`): no clock, no line, no waiting.
@Suite(.tags(.unit)) struct LightTimelineTests {
    typealias Timeline = LightTimeline<ManualClock.Instant>
    typealias Instant = ManualClock.Instant

    func at(_ milliseconds: Int) -> Instant { Instant(offset: .milliseconds(milliseconds)) }

    @Test func aSteadyPatternSetsTheLineAndWaitsForNothing() {
        var timeline = Timeline()
        timeline.update { $0.paired = true }
        #expect(timeline.next(at: at(0)) == .init(pattern: .off, on: false, until: nil))
        #expect(timeline.next(at: at(60_000)) == .init(pattern: .off, on: false, until: nil))
    }

    @Test func aBlinkingPatternStepsThroughItsCycleFromWhenItWasFirstShown() {
        var timeline = Timeline()
        timeline.update { $0.pairingWindowOpen = true }
        // pairingMode: 1 s on, 1 s off, from 500 ms (when it was first shown).
        #expect(timeline.next(at: at(500)) == .init(pattern: .pairingMode, on: true, until: at(1500)))
        #expect(timeline.next(at: at(1500)) == .init(pattern: .pairingMode, on: false, until: at(2500)))
        // Looked at late (a busy device), it is where the cycle is by then, not a step behind.
        // 4.7 s is 200 ms into the third cycle's "on" (which began at 4.5 s).
        #expect(timeline.next(at: at(4700)) == .init(pattern: .pairingMode, on: true, until: at(5500)))
        #expect(timeline.next(at: at(5500)) == .init(pattern: .pairingMode, on: false, until: at(6500)))
    }

    @Test func aSignalShowsForItsTimeFromItsLatestRaiseThenThePatternUnderneathComesBack() {
        var timeline = Timeline()
        timeline.update { $0.paired = true }
        timeline.raise(.orderPlaced, at: at(0))
        #expect(timeline.next(at: at(0)) == .init(pattern: .orderPlaced, on: true, until: at(3000)))
        #expect(timeline.pattern(at: at(2999)) == .orderPlaced)
        // Raised again at 2 s: the time starts over.
        timeline.raise(.orderPlaced, at: at(2000))
        #expect(timeline.next(at: at(3000)) == .init(pattern: .orderPlaced, on: true, until: at(5000)))
        #expect(timeline.pattern(at: at(5000)) == .off)
        #expect(timeline.next(at: at(5000)) == .init(pattern: .off, on: false, until: nil))
    }

    @Test func aFlashBlinksWithinItsTimeAndTheEarlierOfItsEndAndTheStepIsWhenToLookAgain() {
        var timeline = Timeline()
        timeline.update { $0.paired = true }
        timeline.raise(.acknowledged, at: at(0))
        // acknowledge: 300 ms on, 300 ms off, shown for 600 ms.
        #expect(timeline.next(at: at(0)) == .init(pattern: .acknowledge, on: true, until: at(300)))
        #expect(timeline.next(at: at(300)) == .init(pattern: .acknowledge, on: false, until: at(600)))
        #expect(timeline.next(at: at(600)) == .init(pattern: .off, on: false, until: nil))
        // A long flash while a slow blink runs underneath: it ends at its own time, the blink goes on after.
        var pairing = Timeline()
        pairing.update { $0.pairingWindowOpen = true }
        _ = pairing.next(at: at(0))
        pairing.raise(.alreadyOrdered, at: at(100))
        #expect(pairing.next(at: at(100)) == .init(pattern: .alreadyOrdered, on: true, until: at(800)))
        #expect(pairing.next(at: at(2100)).pattern == .pairingMode)
    }
}
