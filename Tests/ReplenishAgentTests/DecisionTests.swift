import Testing

@testable import ReplenishAgent

/// The pure rules: debounce, backoff, delivery decisions, refresh timing, outbox.
@Suite(.tags(.unit)) struct DecisionTests {
    typealias Instant = ManualClock.Instant

    func at(_ milliseconds: Int) -> Instant { Instant(offset: .milliseconds(milliseconds)) }

    /// A button's line (`InputLine`), debounce and long-press time in milliseconds.
    func button(debounce: Int = 30, longPress: Int = 5000) -> InputLine<Instant> {
        InputLine(
            .init(
                name: "button", kind: .button, line: nil, activeLow: false, bias: .asIs,
                debounceMilliseconds: debounce, longPressMilliseconds: longPress))
    }

    /// Drives a button's line with edges and settles it at every deadline, returning the presses.
    func presses(_ edges: [(Int, Bool)], debounce: Int = 30, longPress: Int = 5000) -> [ButtonPress.Kind] {
        var line = button(debounce: debounce, longPress: longPress)
        var kinds: [ButtonPress.Kind] = []
        for (time, active) in edges {
            if let press = line.edge(active: active, request: nil, at: at(time)) { kinds.append(press.press.kind) }
        }
        if let deadline = line.deadline, let press = line.settle(at: deadline) { kinds.append(press.press.kind) }
        return kinds
    }

    /// Whether `edges` make one press held exactly `milliseconds`: long from that long-press time, short below it.
    func held(_ edges: [(Int, Bool)], _ milliseconds: Int) -> Bool {
        presses(edges, longPress: milliseconds) == [.long] && presses(edges, longPress: milliseconds + 1) == [.short]
    }

    @Test func cleanShortAndLongPresses() {
        #expect(presses([(0, true), (200, false)]) == [.short])
        #expect(held([(0, true), (200, false)], 200))
        #expect(presses([(0, true), (4999, false)]) == [.short])
        #expect(held([(0, true), (4999, false)], 4999))
        #expect(presses([(0, true), (5000, false)]) == [.long])
        #expect(held([(0, true), (5000, false)], 5000))
    }

    @Test func glitchShorterThanDebounceIsNoPress() {
        #expect(presses([(0, true), (10, false)]) == [])
        #expect(presses([(0, true), (29, false)]) == [])
    }

    @Test func settlingBeforeTheDeadlineDoesNothing() {
        var line = button(debounce: 30)
        #expect(line.edge(active: true, request: nil, at: at(0)) == nil)
        #expect(line.settle(at: at(29)) == nil)
        #expect(!line.isActive)
        #expect(line.settle(at: at(30)) == nil)
        #expect(line.isActive)
    }

    /// The press is the request's whose edge made the level that settled active, not a later request's.
    @Test func aPressIsItsAuthorsRequests() {
        var line = button(debounce: 30)
        _ = line.edge(active: true, request: 1, at: at(0))
        _ = line.edge(active: true, request: 2, at: at(100))
        _ = line.edge(active: false, request: 2, at: at(200))
        #expect(
            line.settle(at: at(230)) == RecognisedPress(press: ButtonPress(input: "button", kind: .short), request: 1))
    }

    @Test func tenThousandSeededBouncePatternsEachGiveExactlyOnePress() {
        var random = RandomSource.seeded(state: 20_261_122)
        for _ in 0..<10_000 {
            var line = EdgeScript()
            // Press bounce: edges closer together than the debounce period, ending active.
            for _ in 0..<Int.random(in: 0...12, using: &random) { line.toggle(thenWait: 1...29, using: &random) }
            if !line.level { line.set(true) }
            let pressStart = line.edges.last!.0
            line.time += Int.random(in: 60...3000, using: &random)
            // Release bounce, ending inactive.
            for _ in 0..<Int.random(in: 0...12, using: &random) { line.toggle(thenWait: 1...29, using: &random) }
            if line.level { line.set(false) }
            let edges = line.edges
            #expect(presses(edges) == [.short], "\(edges)")
            // The line sat still for at least 60 ms between the last press edge and the first release edge: the
            // press was held at least that long, and no longer than from the last press edge to the last edge.
            #expect(presses(edges, longPress: 60) == [.long], "\(edges)")
            #expect(presses(edges, longPress: edges.last!.0 - pressStart + 1) == [.short], "\(edges)")
        }
    }

    @Test func backoffCeilingsGrowAndCap() {
        let backoff = Backoff(base: .seconds(2), cap: .seconds(60))
        #expect(backoff.ceiling(attempt: 1) == .seconds(2))
        #expect(backoff.ceiling(attempt: 2) == .seconds(4))
        #expect(backoff.ceiling(attempt: 5) == .seconds(32))
        #expect(backoff.ceiling(attempt: 6) == .seconds(60))
        #expect(backoff.ceiling(attempt: 1000) == .seconds(60))
        var random = RandomSource.seeded(state: 1)
        for attempt in 1...10 {
            let delay = backoff.delay(attempt: attempt, using: &random)
            #expect(delay >= .zero && delay <= backoff.ceiling(attempt: attempt))
        }
    }

    @Test func noRetryComesSoonerThanHalfItsCeilingOrOneSecond() {
        var random = RandomSource.seeded(state: 11)
        for backoff in [Backoff.orders, .duties, .tokenRefresh, .configurationFault, .stateWrite] {
            for attempt in 1...12 {
                let ceiling = backoff.ceiling(attempt: attempt)
                var lowest = ceiling
                var highest = Duration.zero
                for _ in 0..<500 {
                    let delay = backoff.delay(attempt: attempt, using: &random)
                    #expect(delay >= .seconds(1))
                    #expect(delay >= ceiling / 2 && delay <= ceiling)
                    lowest = min(lowest, delay)
                    highest = max(highest, delay)
                }
                // Still jittered: the draws spread over the upper half (not one fixed value), when it is wider
                // than the 1 s floor.
                if ceiling / 2 > .seconds(1) { #expect(highest - lowest > ceiling / 4) }
            }
        }
    }

    @Test func fiveFailedOrderAttemptsFitInUnderAMinute() {
        let total = (1...5).map { Backoff.orders.ceiling(attempt: $0) }.reduce(.zero, +)
        #expect(total < .seconds(60))
        #expect(Backoff.orders.ceiling(attempt: 1) <= .seconds(5))
    }

    func decide(_ result: Result<HTTPResponse, AgentError>, refreshed: Bool = false) -> DeliveryPolicy.Decision {
        var random = RandomSource.seeded(state: 7)
        return DeliveryPolicy.decide(result, attempt: 1, tokenAlreadyRefreshed: refreshed, using: &random)
    }

    @Test func deliveryDecisions() {
        #expect(
            decide(.success(json(200, #"{"eventInstanceId":"amzn1.x","detailCode":"TEST_ORDER_PLACED"}"#)))
                == .done(detailCode: "TEST_ORDER_PLACED", eventInstanceId: "amzn1.x"))
        #expect(
            decide(.success(json(200, #"{"detailCode":"ORDER_INPROGRESS"}"#)))
                == .done(detailCode: "ORDER_INPROGRESS", eventInstanceId: nil))
        #expect(decide(.success(json(400, #"{"message":"Invalid token"}"#))) == .refreshTokenAndRetry)
        #expect(decide(.success(json(401, ""))) == .refreshTokenAndRetry)
        #expect(
            decide(.success(json(400, "{}", headers: [("x-amzn-errortype", "InvalidTokenException:http://x")])))
                == .refreshTokenAndRetry)
        if case .retry = decide(.success(json(400, #"{"message":"Invalid token"}"#)), refreshed: true) {
        } else {
            Issue.record("a second token rejection must not loop on refresh")
        }
        #expect(
            decide(.success(json(404, #"{"message":"no slot"}"#))) == .park(reason: .unknownSlot)
        )
        #expect(decide(.success(json(400, #"{"message":"Slot not subscribed"}"#))) == .park(reason: .notSubscribed))
        for status in [500, 502, 503] {
            guard case .retry(let delay, _) = decide(.success(json(status, "oops"))) else {
                Issue.record("\(status) must be retried")
                continue
            }
            #expect(delay <= Backoff.orders.ceiling(attempt: 1))
        }
        guard case .retry(let delay, _) = decide(.success(json(503, "", headers: [("retry-after", "120")]))) else {
            Issue.record("503 must be retried")
            return
        }
        #expect(delay == .seconds(120))
        if case .retry = decide(.success(json(200, "not json"))) {
        } else {
            Issue.record("unreadable 200 must be retried")
        }
        // 429 waits at least Retry-After; a Retry-After beyond an hour is held to an hour; an HTTP date falls
        // back to the backoff.
        #expect(
            decide(.success(json(429, "", headers: [("retry-after", " 30 ")]))).retryDelay.map { $0 >= .seconds(30) }
                == true)
        #expect(decide(.success(json(503, "", headers: [("retry-after", "999999999")]))).retryDelay == .seconds(3600))
        #expect(
            decide(.success(json(503, "", headers: [("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]))).retryDelay
                .map { $0 <= Backoff.orders.ceiling(attempt: 1) } == true)
        // Other 4xx park with the status; an unknown detail code parks too (it says neither placed nor not).
        #expect(decide(.success(json(409, #"{"message":"conflict"}"#))) == .park(reason: .refused(status: 409)))
        // A 408 (the server gave up on the request) is transient, like a timeout.
        #expect(decide(.success(json(408, ""))).retryDelay != nil)
        // A token fault in other words (an expired-token type, a gateway's message) refreshes, never parks.
        #expect(
            decide(.success(json(400, "{}", headers: [("x-amzn-errortype", "ExpiredTokenException:x")])))
                == .refreshTokenAndRetry)
        #expect(decide(.success(json(400, #"{"message":"The security token has expired"}"#))) == .refreshTokenAndRetry)
        #expect(
            decide(.success(json(200, #"{"detailCode":"ORDER_FAILED"}"#)))
                == .park(reason: .unknownDetailCode("ORDER_FAILED")))
        #expect(
            decide(.success(json(200, #"{"detailCode":"STANDARD_ORDER_PLACED"}"#)))
                == .done(detailCode: "STANDARD_ORDER_PLACED", eventInstanceId: nil))
        if case .retry = decide(.failure(AgentError(.network, "timeout"))) {
        } else {
            Issue.record("network must be retried")
        }
    }

    @Test func refreshHappensBeforeExpiryForShortAndLongLifetimes() {
        for lifetime in [10.0, 60, 3573, 3600, 86400] {
            for jitter in [0.0, 0.5, 0.999] {
                let wait = RefreshSchedule.secondsUntilRefresh(
                    now: 0, expiresAt: lifetime, lifetime: lifetime, jitter: jitter)
                #expect(wait > 0 && wait < lifetime)
                #expect(lifetime - wait >= min(lifetime * 0.25, 300) - 0.001)
            }
        }
        // A 10 s token is handed out until 2 s before expiry; an hour's token stops 12 s before (the DRS connect
        // timeout and the send), so a slow connect cannot carry it past its expiry.
        #expect(RefreshSchedule.isTooCloseToExpiry(now: 98.5, expiresAt: 100, lifetime: 10))
        #expect(!RefreshSchedule.isTooCloseToExpiry(now: 97.5, expiresAt: 100, lifetime: 10))
        #expect(RefreshSchedule.isTooCloseToExpiry(now: 3589, expiresAt: 3600, lifetime: 3600))
        #expect(!RefreshSchedule.isTooCloseToExpiry(now: 3587, expiresAt: 3600, lifetime: 3600))
        // The scheduled refresh always comes before the token stops being handed out.
        for lifetime in [10.0, 60, 3600, 86400] {
            let due = lifetime - RefreshSchedule.margin(lifetime: lifetime) * 1.2
            #expect(!RefreshSchedule.isTooCloseToExpiry(now: due, expiresAt: lifetime, lifetime: lifetime))
        }
    }

    @Test func outboxCoalescesOnePendingEntryPerSlot() {
        var outbox = Outbox()
        #expect(outbox.accept(slot: "a", at: 1) == .queued)
        #expect(outbox.accept(slot: "a", at: 2) == .coalesced)
        #expect(outbox.accept(slot: "b", at: 3) == .queued)
        #expect(outbox.pending.map(\.slot) == ["a", "b"])
        #expect(outbox.entry(for: "a")?.pressedAt == [1, 2])
        for time in 0..<40 { _ = outbox.accept(slot: "a", at: Double(time)) }
        #expect(outbox.entry(for: "a")?.pressedAt.count == Outbox.maximumPressTimes)
        outbox.park(slot: "b", reason: "not subscribed")
        #expect(outbox.pending.map(\.slot) == ["a"])
        #expect(outbox.parked.map(\.slot) == ["b"])
        #expect(outbox.accept(slot: "b", at: 9) == .queued)
        #expect(outbox.entry(for: "b")?.isParked == false)
        outbox.recordAnswer(slot: "a", detailCode: "STANDARD_ORDER_PLACED", eventInstanceId: "o1", at: 10)
        #expect(outbox.entry(for: "a") == nil)
        #expect(outbox.entry(for: "b")?.isParked == false)
    }
}

extension DeliveryPolicy.Decision {
    /// The wait of a `.retry`, nil for any other decision.
    var retryDelay: Duration? {
        if case .retry(let delay, _) = self { return delay }
        return nil
    }
}
