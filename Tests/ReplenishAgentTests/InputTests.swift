import Logging
import Synchronization
import Testing

@testable import ReplenishAgent

/// Level sensors, press policy (cooldown, re-pairing), LED priorities, and the input pipeline on a manual
/// clock.
@Suite(.tags(.unit)) struct InputTests {
    typealias Instant = ManualClock.Instant

    func at(_ milliseconds: Int) -> Instant { Instant(offset: .milliseconds(milliseconds)) }

    /// Feeds level reports (time, active) to a sensor, ticking at every deadline, and returns the times of
    /// the low events.
    func lows(_ reports: [(Int, Bool)], active: Int = 1000, inactive: Int = 5000, until end: Int? = nil) -> [Int] {
        var sensor = LevelSensor<Instant>(
            minimumActive: .milliseconds(active), minimumInactive: .milliseconds(inactive))
        var result: [Int] = []
        func tick(upTo time: Int) {
            while let deadline = sensor.deadline, deadline <= at(time) {
                if sensor.tick(at: deadline) == .low {
                    result.append(
                        Int(
                            deadline.offset.components.seconds * 1000 + deadline.offset.components.attoseconds
                                / 1_000_000_000_000_000))
                }
            }
        }
        for (time, level) in reports {
            tick(upTo: time)
            sensor.level(active: level, at: at(time))
        }
        tick(upTo: end ?? (reports.last.map { $0.0 } ?? 0) + 100_000)
        return result
    }

    @Test func levelMustStayLowForTheMinimumTime() {
        #expect(lows([(0, true)]) == [1000])
        #expect(lows([(0, true), (999, false)]) == [])
        #expect(lows([(0, true), (1000, false)], until: 1000) == [1000])
    }

    @Test func aFlappingSensorGivesOneLowPerRefill() {
        var random = RandomSource.seeded(state: 99)
        for _ in 0..<500 {
            var line = EdgeScript()
            // Waves: flapping faster than the refill hysteresis, for up to 20 s.
            while line.time < 20_000 { line.toggle(thenWait: 10...4_000, using: &random) }
            let reports = line.edges
            let found = lows(reports, until: 20_000)
            #expect(found.count <= 1 + reports.count / 2)
            // Between two lows the sensor must have been steadily full for the refill time.
            for (first, second) in zip(found, found.dropFirst()) {
                let fullSpans = zip(reports, reports.dropFirst()).filter {
                    !$0.0.1 && $0.0.0 > first && $0.1.0 - $0.0.0 >= 5000 && $0.1.0 <= second
                }
                #expect(!fullSpans.isEmpty, "two lows without a refill in between: \(reports)")
            }
        }
        // Flapping faster than the minimum active time never counts.
        #expect(lows((0..<100).map { ($0 * 400, $0 % 2 == 0) }) == [])
    }

    @Test func refillRearmsTheSensor() {
        #expect(lows([(0, true), (2000, false), (7000, true)]) == [1000, 8000])
        #expect(lows([(0, true), (2000, false), (6000, true)]) == [1000])
    }

    @Test func cooldownAcknowledgesWithoutReordering() {
        var policy = PressPolicy<Instant>()
        let cooldown = Duration.seconds(60)
        #expect(policy.decide(.short, slot: "a", cooldown: cooldown, paired: true, at: at(0)) == .order(slot: "a"))
        policy.orderAccepted(slot: "a", at: at(0))
        guard case .acknowledgeOnly = policy.decide(.short, slot: "a", cooldown: cooldown, paired: true, at: at(59_999))
        else {
            Issue.record("a press within the cooldown must only be acknowledged")
            return
        }
        #expect(policy.decide(.short, slot: "b", cooldown: cooldown, paired: true, at: at(1000)) == .order(slot: "b"))
        #expect(policy.decide(.short, slot: "a", cooldown: cooldown, paired: true, at: at(60_000)) == .order(slot: "a"))
        #expect(policy.decide(.short, slot: nil, cooldown: cooldown, paired: true, at: at(0)) == .unmapped)
        #expect(
            policy.decide(.low, slot: "a", cooldown: cooldown, paired: true, at: at(1)) == .orderFromSensor(slot: "a"))
    }

    @Test func longPressArmsAndASecondConfirmsRepairing() {
        var policy = PressPolicy<Instant>(confirmationWindow: .seconds(30))
        #expect(policy.decide(.long, slot: "a", cooldown: .zero, paired: false, at: at(0)) == .openPairingWindow)
        #expect(policy.decide(.long, slot: "a", cooldown: .zero, paired: true, at: at(0)) == .armRepairing)
        #expect(policy.isRepairingArmed(at: at(29_999)))
        #expect(policy.decide(.long, slot: "a", cooldown: .zero, paired: true, at: at(29_999)) == .confirmRepairing)
        #expect(!policy.isRepairingArmed(at: at(30_000)))
        // A short press cancels; an expired window re-arms instead of confirming.
        #expect(policy.decide(.long, slot: "a", cooldown: .zero, paired: true, at: at(40_000)) == .armRepairing)
        #expect(policy.decide(.short, slot: "a", cooldown: .zero, paired: true, at: at(41_000)) == .cancelRepairing)
        #expect(policy.decide(.long, slot: "a", cooldown: .zero, paired: true, at: at(50_000)) == .armRepairing)
        #expect(policy.decide(.long, slot: "a", cooldown: .zero, paired: true, at: at(80_000)) == .armRepairing)
    }

    @Test func ledPatternPriorities() {
        var facts = LEDPattern.Facts()
        // Unpaired: pairing mode only while the window is open; with it closed the customer must act.
        #expect(LEDPattern.pattern(for: facts) == .needsAttention)
        facts.pairingWindowOpen = true
        #expect(LEDPattern.pattern(for: facts) == .pairingMode)
        facts.paired = true
        #expect(LEDPattern.pattern(for: facts) == .off)
        #expect(LEDPattern.off.steps == nil)  // idle: no blinking timer
        facts.orderJustPlaced = true
        #expect(LEDPattern.pattern(for: facts) == .orderPlaced)
        facts.pendingOrders = 1
        #expect(LEDPattern.pattern(for: facts) == .orderSent)
        facts.lastAttemptFailedForNetwork = true
        #expect(LEDPattern.pattern(for: facts) == .noNetwork)
        facts.parkedOrders = 1
        #expect(LEDPattern.pattern(for: facts) == .needsAttention)
        facts.acknowledging = true
        #expect(LEDPattern.pattern(for: facts) == .acknowledge)
        facts.repairingArmed = true
        #expect(LEDPattern.pattern(for: facts) == .confirmRepairing)
        // Every blinking pattern is distinct.
        let cycles = LEDPattern.allCases.compactMap {
            $0.steps.map { $0.map { "\($0.on)\($0.milliseconds)" }.joined() }
        }
        #expect(Set(cycles).count == cycles.count)
    }

    @Test func pipelineDebouncesOnAManualClockAndSleepsWhenIdle() async throws {
        let clock = ManualClock()
        let seen = Mutex<[ButtonPress]>([])
        let waiters = PressWaiters()
        let pipeline = InputPipeline(
            board: Self.buttonBoard, clock: clock, logger: Self.quiet, requests: waiters,
            handler: { press in
                seen.withLock { $0.append(press) }
                return .success("ok")
            })
        let driver = StepDriver(clock: clock, pipeline.step)
        let id = waiters.add()
        // A bounce burst at one instant, then held.
        for level in [true, false, true, false, true] {
            await pipeline.receive(InputEdge(input: "button", active: level, request: id))
        }
        #expect(await pipeline.step().until == clock.now.advanced(by: .milliseconds(30)))
        await driver.pass(.milliseconds(200))
        #expect(await pipeline.isActive("button") == true)
        for level in [false, true, false] {
            await pipeline.receive(InputEdge(input: "button", active: level, request: id))
        }
        await driver.pass(.milliseconds(29))
        #expect(seen.withLock { $0 }.isEmpty)
        await driver.pass(.milliseconds(1))
        try #require(seen.withLock { $0 } == [ButtonPress(input: "button", kind: .short)])
        guard case .success = await waiters.outcome(of: id, timeout: .seconds(1), clock: clock) else {
            Issue.record("the waiter must get the press's outcome")
            return
        }
        // Idle: no deadline is left to wake for.
        #expect(await pipeline.step().until == nil)
    }

    /// Issue 42.6: a press recognised before the stop is carried out before the pipeline's `run` returns (the
    /// agent exits after it): a press handed to its handler in a task of its own was not waited for, and a stop
    /// could end the agent before the press was written.
    @Test func theStopWaitsForAPressBeingHandled() async throws {
        let clock = ManualClock()
        let origin = Duration.seconds(1000)
        let log = Mutex<[String]>([])
        let gate = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let pipeline = InputPipeline(
            board: Self.buttonBoard, clock: clock, monotonicNow: { origin + clock.now.offset }, logger: Self.quiet,
            handler: { _ in
                // Not cancellable: the handler finishes only when the test opens the gate.
                await withCheckedContinuation { continuation in
                    gate.withLock { $0 = continuation }
                    log.withLock { $0.append("handler started") }
                }
                log.withLock { $0.append("handler finished") }
                return .success("handled")
            })
        let (edges, input) = AsyncStream<InputEdge>.makeStream()
        let running = Task {
            await pipeline.run(edges: edges)
            log.withLock { $0.append("run returned") }
        }
        // A press the kernel saw 300 ms and 100 ms ago: settled by the time the edges end (the stop).
        input.yield(InputEdge(input: "button", active: true, timestamp: origin - .milliseconds(300)))
        input.yield(InputEdge(input: "button", active: false, timestamp: origin - .milliseconds(100)))
        input.finish()
        var spins = 0
        while spins < 10_000, !log.withLock({ $0.contains("handler started") }) {
            spins += 1
            await Task.yield()
        }
        try #require(log.withLock { $0 } == ["handler started"])
        for _ in 0..<1_000 { await Task.yield() }
        gate.withLock { $0?.resume() }
        await running.value
        #expect(log.withLock { $0 } == ["handler started", "handler finished", "run returned"])
    }

    /// A press is answered to the request whose edge started it, never to another waiting on the same input: a
    /// request that went away (`forget`) takes no later press's answer, and one that pressed a button already
    /// down made no press of its own (issue 29, item 7: dead clients' waiters took the next presses' answers).
    @Test func aPressIsAnsweredToTheRequestThatMadeItAndAForgottenOneTakesNothing() async throws {
        let clock = ManualClock()
        let waiters = PressWaiters()
        let pipeline = InputPipeline(
            board: Self.buttonBoard, clock: clock, logger: Self.quiet, requests: waiters,
            handler: { press in .success("\(press.kind.rawValue)") })
        let driver = StepDriver(clock: clock, pipeline.step)
        // A client that goes away while holding: its press is handled, answered to no one.
        let gone = waiters.add()
        await pipeline.receive(InputEdge(input: "button", active: true, request: gone))
        await driver.pass(.milliseconds(100))
        // A second request presses the button already down: the press stays the first one's.
        let second = waiters.add()
        await pipeline.receive(InputEdge(input: "button", active: true, request: second))
        waiters.forget(gone)
        await pipeline.receive(InputEdge(input: "button", active: false, request: gone))
        await pipeline.receive(InputEdge(input: "button", active: false, request: second))
        await driver.pass(.milliseconds(100))
        waiters.forget(second)
        // The next request's own press is answered to it, with the older waiters gone.
        let next = waiters.add()
        await pipeline.receive(InputEdge(input: "button", active: true, request: next))
        await driver.pass(.milliseconds(100))
        await pipeline.receive(InputEdge(input: "button", active: false, request: next))
        await driver.pass(.milliseconds(100))
        guard case .success(let answer) = await waiters.outcome(of: next, timeout: .seconds(1), clock: clock) else {
            Issue.record("the request that made the press must get its outcome")
            return
        }
        #expect(answer == "short")
        // The forgotten waiter is gone: nothing kept for it.
        guard case .failure(let error) = await waiters.outcome(of: gone, timeout: .seconds(1), clock: clock) else {
            Issue.record("a forgotten request has no outcome")
            return
        }
        #expect(error.message == "unknown press")
    }

    @Test func aPressIsWaitedForUpToItsTimeoutAndItsOutcomeUpToTheLimitMore() {
        var unrecognised = PressWait(startedAt: at(0), timeout: .seconds(5))
        #expect(unrecognised.next(recognised: false, at: at(0)) == .wait(until: at(5000)))
        #expect(unrecognised.next(recognised: false, at: at(5000)) == .notRecognised)

        var slow = PressWait(startedAt: at(0), timeout: .seconds(5))
        #expect(slow.next(recognised: true, at: at(5000)) == .wait(until: at(105_000)))
        #expect(slow.next(recognised: true, at: at(104_999)) == .wait(until: at(105_000)))
        #expect(slow.next(recognised: true, at: at(105_000)) == .outcomeUnknown)
        // A press held 2 s with 30 ms debounce is waited for 12.06 s to be recognised.
        #expect(
            PressWait<Instant>.timeout(hold: .seconds(2), debounce: .milliseconds(30)) == .milliseconds(12_060))
    }

    /// A one-button board for the pipeline tests: debounce 30 ms, long press from 5 s.
    static let buttonBoard = BoardFile(
        name: "t", backend: .simulated, chip: nil,
        inputs: [
            .init(
                name: "button", kind: .button, line: nil, activeLow: false, bias: .asIs, debounceMilliseconds: 30,
                longPressMilliseconds: 5000)
        ], outputs: [])

    /// No log output: the tests' output stays readable.
    static let quiet = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    /// A pipeline on `clock` whose CLOCK_MONOTONIC is the manual clock's time plus 1000 s (another origin than
    /// the pipeline's clock: only an edge's age may cross from one to the other), and the presses it recognised.
    func timedPipeline(_ clock: ManualClock) -> (InputPipeline<ManualClock>, PressLog, (Int) -> Duration) {
        let origin = Duration.seconds(1000)
        let seen = PressLog()
        let monotonicNow: @Sendable () -> Duration = { origin + clock.now.offset }
        let pipeline = InputPipeline(
            board: Self.buttonBoard, clock: clock, monotonicNow: monotonicNow, logger: Self.quiet,
            handler: {
                seen.append($0)
                return .success("seen")
            })
        // The kernel's timestamp of an edge that happened at `milliseconds` on the manual clock.
        return (pipeline, seen, { origin + .milliseconds($0) })
    }

    /// Hands `edges` (active or not, at a time in milliseconds by the kernel's clock) to `pipeline` at once, as a
    /// backend does with a burst it read late.
    func readAtOnce(
        _ edges: [(Bool, Int)], to pipeline: InputPipeline<ManualClock>, kernel: (Int) -> Duration
    ) async {
        for (active, at) in edges {
            await pipeline.receive(InputEdge(input: "button", active: active, timestamp: kernel(at)))
        }
    }

    /// Edges read late, all at once (a busy device): with their kernel times they are one press of 196 ms; timed
    /// by when they arrived (all at 500 ms) they would be four edges at one instant and no press at all.
    @Test func aBurstDeliveredLateDebouncesByItsKernelTimes() async throws {
        let clock = ManualClock()
        let (pipeline, seen, kernel) = timedPipeline(clock)
        clock.advance(by: .milliseconds(500))
        await readAtOnce([(true, 100), (false, 102), (true, 104), (false, 300)], to: pipeline, kernel: kernel)
        // The release settled at 330 ms, already past: it is due without the clock moving.
        #expect(await pipeline.step().until == nil)
        #expect(seen.all == [ButtonPress(input: "button", kind: .short)])

        // The same edges without timestamps are timed by their arrival: no press.
        let (untimed, none, _) = timedPipeline(clock)
        for active in [true, false, true, false] { await untimed.receive(InputEdge(input: "button", active: active)) }
        await StepDriver(clock: clock, untimed.step).pass(.milliseconds(100))
        #expect(none.all.isEmpty)
    }

    /// A release the kernel saw at 4 s but that reached the pipeline at 6 s is a short press (held 4 s), not a
    /// long one: the edge's own timestamp decides, not the time the pipeline got it.
    @Test func aLateReleaseIsMeasuredByItsKernelTime() async throws {
        let clock = ManualClock()
        let (pipeline, seen, kernel) = timedPipeline(clock)
        let driver = StepDriver(clock: clock, pipeline.step)
        await pipeline.receive(InputEdge(input: "button", active: true, timestamp: kernel(0)))
        await driver.pass(.milliseconds(30))
        #expect(await pipeline.isActive("button") == true)
        // Held past the long-press time by the arrival clock; the release the kernel saw at 4 s comes late.
        clock.advance(by: .milliseconds(5970))
        await pipeline.receive(InputEdge(input: "button", active: false, timestamp: kernel(4000)))
        // (Timed by its arrival, this release would settle here, 30 ms on, as a 6 s long press.)
        await driver.pass(.milliseconds(30))
        #expect(seen.all == [ButtonPress(input: "button", kind: .short)])

        // And one the kernel saw at 5.5 s, read at 5.6 s, is long.
        let (second, long, secondKernel) = timedPipeline(clock)
        let start = 6000
        await second.receive(InputEdge(input: "button", active: true, timestamp: secondKernel(start)))
        clock.advance(by: .milliseconds(5600))
        await second.receive(InputEdge(input: "button", active: false, timestamp: secondKernel(start + 5500)))
        await StepDriver(clock: clock, second.step).pass(.milliseconds(30))
        #expect(long.all == [ButtonPress(input: "button", kind: .long)])
    }

    /// Two presses read together (the second's press and release before the first's release was read) are
    /// still two presses, in order: a change that had settled before the next edge happened is settled first.
    @Test func twoPressesReadTogetherAreTwoPresses() async throws {
        let clock = ManualClock()
        let (pipeline, seen, kernel) = timedPipeline(clock)
        clock.advance(by: .milliseconds(7000))
        await readAtOnce([(true, 0), (false, 200), (true, 1000), (false, 6500)], to: pipeline, kernel: kernel)
        await StepDriver(clock: clock, pipeline.step).drain()
        #expect(
            seen.all == [ButtonPress(input: "button", kind: .short), ButtonPress(input: "button", kind: .long)])
    }

    /// A timestamp ahead of CLOCK_MONOTONIC's now is from another clock (a kernel before 5.7 stamps libgpiod v1
    /// events with CLOCK_REALTIME): the edge is timed by its arrival instead, never placed in the future.
    @Test func aTimestampFromAnotherClockFallsBackToArrival() async throws {
        let clock = ManualClock()
        let (pipeline, seen, kernel) = timedPipeline(clock)
        let realtime = kernel(1_800_000_000_000)
        let driver = StepDriver(clock: clock, pipeline.step)
        await pipeline.receive(InputEdge(input: "button", active: true, timestamp: realtime))
        await driver.pass(.milliseconds(29))
        #expect(await pipeline.isActive("button") == false)
        await driver.pass(.milliseconds(1))
        #expect(await pipeline.isActive("button") == true)
        await driver.pass(.milliseconds(200))
        await pipeline.receive(InputEdge(input: "button", active: false, timestamp: realtime))
        await driver.pass(.milliseconds(30))
        #expect(seen.all == [ButtonPress(input: "button", kind: .short)])
    }

    /// An edge's age, which both the pipeline and `gpio-watch`'s `t=` count back from: the time since the kernel
    /// saw it, or zero when there is no timestamp or one from another clock.
    @Test func anEdgesAgeIsTheTimeSinceTheKernelSawIt() {
        let now = Duration.seconds(1000)
        let edge = { (timestamp: Duration?) in InputEdge(input: "button", active: true, timestamp: timestamp) }
        #expect(edge(now - .milliseconds(37)).age(monotonicNow: now) == .milliseconds(37))
        #expect(edge(now).age(monotonicNow: now) == .zero)
        #expect(edge(nil).age(monotonicNow: now) == .zero)
        #expect(edge(now + .seconds(1_800_000_000)).age(monotonicNow: now) == .zero)
    }
}

/// The presses a test pipeline's handler was given, in order.
final class PressLog: Sendable {
    private let presses = Mutex<[ButtonPress]>([])

    func append(_ press: ButtonPress) { presses.withLock { $0.append(press) } }
    var all: [ButtonPress] { presses.withLock { $0 } }
    var count: Int { presses.withLock { $0.count } }
}
