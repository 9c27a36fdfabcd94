import Foundation
import Testing

@testable import ReplenishAgent

/// The slots' orders in memory, as the follow-up sees them in `DeliveryLoop`.
actor MemoryOrderBook: FollowedOrders {
    private(set) var outbox = Outbox()

    func recordAnswer(slot: String, detailCode: String, eventInstanceId: String?, at time: Double) {
        outbox.recordAnswer(slot: slot, detailCode: detailCode, eventInstanceId: eventInstanceId, at: time)
    }

    func openOrders(of slots: [String]) -> [(slot: String, eventInstanceId: String)] {
        slots.compactMap { slot in outbox.openOrder(slot: slot).map { (slot, $0.eventInstanceId) } }
    }

    func openOrder(slot: String) -> (eventInstanceId: String, status: String?)? { outbox.openOrder(slot: slot) }

    func recordFollowUp(slot: String, eventInstanceId id: String, state: String, open: Bool, at time: Double) {
        outbox.recordFollowUp(slot: slot, eventInstanceId: id, status: state, open: open, at: time)
    }
}

/// The order follow-up on the manual clock: a placed order is asked about every few hours (minutes in the
/// test phase) until DRS says it shipped, and then never again; weeks pass without a call when no order is
/// open.
@Suite(.tags(.unit)) struct OrderFollowUpTests {
    let clock = ManualClock()
    let epoch = 1_800_000_000.0

    func service(
        drs: ScriptedHTTPClient, status: MemoryOrderBook, phase: AgentConfig.Phase
    ) throws -> OrderTracker<ManualClock> {
        let tokens = try TokenManager(
            store: MemoryTokenStore(
                TokenSet(
                    clientId: "c", refreshToken: Secret("Atzr|r"), accessToken: Secret("Atza|a"),
                    accessTokenExpiresAt: epoch + 365 * 86400, accessTokenLifetime: 365 * 86400)),
            lwa: LWAClient(
                http: ScriptedHTTPClient { _ in json(503, "") },
                tokenURL: try EndpointURL("http://127.0.0.1:1/auth/o2/token"), clientSecret: nil),
            clock: clock, wallTime: clock.wallTime(from: epoch), logger: .init(label: "test"))
        return OrderTracker(
            drs: DRSSession(
                client: DRSClient(http: drs, baseURL: try EndpointURL("http://127.0.0.1:1")), tokens: tokens),
            tokens: tokens,
            orders: status, slots: ["slot-1"], phase: phase, clock: clock, wallTime: clock.wallTime(from: epoch),
            random: .seeded(state: 9), logger: .init(label: "test"))
    }

    func orderInfo(_ status: String) -> HTTPResponse {
        json(
            200,
            #"{"orderInfoData":{"instanceId":"amzn1.dash.v2.o.1","orderItems":[{"asin":"B0","expectedDeliveryDate":null,"quantity":1,"slotId":"slot-1","status":"\#(status)"}]}}"#
        )
    }

    /// DRS giving `answers` in turn, then 500 to every request.
    func answering(_ answers: [HTTPResponse]) -> ScriptedHTTPClient {
        let queue = Locked(answers)
        return ScriptedHTTPClient { _ in
            var rest = queue.value
            let next = rest.isEmpty ? json(500, "") : rest.removeFirst()
            queue.value = rest
            return next
        }
    }

    /// Moves the clock `hours` forward, the service doing what comes due on the way.
    func pass(hours: Int, _ followUp: OrderTracker<ManualClock>) async {
        await StepDriver(clock: clock, followUp.step).pass(.seconds(hours * 3600))
    }

    @Test func productionAsksEveryFewHoursUntilShippedThenNeverAgain() async throws {
        let shipped = Locked(false)
        let drs = ScriptedHTTPClient { [self] request in
            #expect(request.url.hasSuffix("/getOrderInfo/amzn1.dash.v2.o.1"))
            return orderInfo(shipped.value ? "Shipped" : "Processing")
        }
        let status = MemoryOrderBook()
        let followUp = try service(drs: drs, status: status, phase: .production)

        // A week with no order placed: not one call.
        await pass(hours: 7 * 24, followUp)
        #expect(drs.requests.isEmpty)

        // An order is placed: asked about every 5 to 7 hours.
        await status.recordAnswer(
            slot: "slot-1", detailCode: "STANDARD_ORDER_PLACED", eventInstanceId: "amzn1.dash.v2.o.1", at: epoch)
        await pass(hours: 2 * 24, followUp)
        let twoDays = drs.requests.count
        #expect(twoDays >= 48 / 7 && twoDays <= 48 / 5 + 1, "\(twoDays) calls in two days")
        #expect(await status.outbox.slots["slot-1"]?.orderStatus == "Processing")
        #expect(await status.outbox.slots["slot-1"]?.orderOpen == true)

        // Shipped: recorded, and the follow-up stops for good.
        shipped.value = true
        await pass(hours: 8, followUp)
        #expect(await status.outbox.slots["slot-1"]?.orderStatus == "Shipped")
        #expect(await status.outbox.slots["slot-1"]?.orderOpen == false)
        let atShipping = drs.requests.count
        await pass(hours: 14 * 24, followUp)
        #expect(drs.requests.count == atShipping)
    }

    @Test func theTestPhaseAsksEveryFewMinutesAndAFailureBacksOff() async throws {
        let drs = answering([json(503, ""), json(503, ""), orderInfo("Cancelled")])
        let status = MemoryOrderBook()
        await status.recordAnswer(
            slot: "slot-1", detailCode: "STANDARD_ORDER_PLACED", eventInstanceId: "amzn1.dash.v2.o.1", at: epoch)
        let followUp = try service(drs: drs, status: status, phase: .test)
        // Minutes, not hours: within an hour the two failures are retried and the cancellation is seen.
        await pass(hours: 1, followUp)
        #expect(drs.requests.count == 3)
        #expect(await status.outbox.slots["slot-1"]?.orderStatus == "Cancelled")
        #expect(await status.outbox.slots["slot-1"]?.orderOpen == false)
    }

    @Test func answersAreReadStrictly() throws {
        #expect(
            try OrderFollowUp.status(fromAnswer: Array(orderInfo("Processing").body), slot: "slot-1") == "Processing")
        for bad in ["", "{}", #"{"orderInfoData":{"orderItems":[]}}"#] {
            #expect(throws: AgentError.self) { try OrderFollowUp.status(fromAnswer: Array(bad.utf8), slot: "slot-1") }
        }
        #expect(
            OrderFollowUp.isFinal("Shipped") && OrderFollowUp.isFinal("Canceled") && !OrderFollowUp.isFinal("Pending"))
    }
}

extension OrderFollowUpTests {
    @Test func aPressWhileOpenAsksAtOnceAtMostOnceAMinuteAndAnUnreachableDRSLetsThePressThrough() async throws {
        let drs = answering([orderInfo("Processing"), json(503, ""), orderInfo("Shipped")])
        let status = MemoryOrderBook()
        await status.recordAnswer(
            slot: "slot-1", detailCode: "STANDARD_ORDER_PLACED", eventInstanceId: "amzn1.dash.v2.o.1", at: epoch)
        let followUp = try service(drs: drs, status: status, phase: .production)

        // Asked at once: still processing, so the press is recorded rather than sent.
        #expect(await followUp.recheck(slot: "slot-1") == PressMeaning.OpenOrder(state: "Processing"))
        #expect(drs.requests.count == 1)
        // Within the minute: the answer stands, DRS is not asked again.
        clock.advance(by: .seconds(30))
        #expect(await followUp.recheck(slot: "slot-1") == PressMeaning.OpenOrder(state: "Processing"))
        #expect(drs.requests.count == 1)
        // DRS unreachable: unknown, so the press is taken as an order (DRS deduplicates), never dropped; and
        // within the minute after that failure, the same.
        clock.advance(by: .seconds(31))
        #expect(await followUp.recheck(slot: "slot-1") == nil)
        clock.advance(by: .seconds(10))
        #expect(await followUp.recheck(slot: "slot-1") == nil)
        #expect(drs.requests.count == 2)
        // Shipped meanwhile: the order is closed, in the slot and in the history, and the press orders.
        clock.advance(by: .seconds(60))
        #expect(await followUp.recheck(slot: "slot-1") == nil)
        let record = await status.outbox
        #expect(record.slots["slot-1"]?.orderOpen == false)
        #expect(record.orders?.last?.status == "Shipped" && record.orders?.last?.open == false)
        // No open order: nothing to ask.
        #expect(await followUp.recheck(slot: "slot-1") == nil)
        #expect(drs.requests.count == 3)
        // A new order within the same minute is asked about at its first press (the spacing is per order).
        await status.recordAnswer(
            slot: "slot-1", detailCode: "STANDARD_ORDER_PLACED", eventInstanceId: "amzn1.dash.v2.o.2", at: epoch)
        #expect(await followUp.recheck(slot: "slot-1") == nil)
        #expect(drs.requests.count == 4)
    }
}

/// The order history in the outbox record (`Outbox.slots`, `Outbox.orders`): what each answer, follow-up, press
/// and cancellation changes.
@Suite(.tags(.unit)) struct OrderHistoryTests {
    /// The press count comes from `outbox.json`: a hand-edited Int.max must not trap the next press.
    @Test func aPressCountAtIntMaxInTheOutboxFileStaysThere() throws {
        let json = #"""
            {"version":1,"entries":[],"slots":{"a":{"orderOpen":true,"lastEventInstanceId":"o1"}},
             "orders":[{"slot":"a","detailCode":"STANDARD_ORDER_PLACED","eventInstanceId":"o1","answeredAt":1,
                        "open":true,"pressesWhileOpen":9223372036854775807}]}
            """#
        var record = try JSONDecoder().decode(Outbox.self, from: Data(json.utf8))
        record.recordPressWhileOpen(slot: "a", at: 2)
        #expect(record.orders?.last?.pressesWhileOpen == Int.max && record.orders?.last?.lastPressWhileOpenAt == 2)
    }

    @Test func answersFollowUpsPressesAndCancellationsAreRecorded() {
        var record = Outbox()
        record.recordAnswer(slot: "a", detailCode: "TEST_ORDER_PLACED", eventInstanceId: "o1", at: 100)
        #expect(record.openOrder(slot: "a")?.eventInstanceId == "o1")
        #expect(
            record.orders == [
                .init(slot: "a", detailCode: "TEST_ORDER_PLACED", eventInstanceId: "o1", answeredAt: 100, open: true)
            ])

        record.recordPressWhileOpen(slot: "a", at: 150)
        record.recordPressWhileOpen(slot: "a", at: 160)
        #expect(record.orders?.last?.pressesWhileOpen == 2 && record.orders?.last?.lastPressWhileOpenAt == 160)

        record.recordFollowUp(slot: "a", eventInstanceId: "o1", status: "Processing", open: true, at: 200)
        #expect(record.openOrder(slot: "a")?.status == "Processing")
        #expect(record.orders?.last?.checkedAt == 200)

        // ORDER_INPROGRESS places nothing: recorded, but opens no order of its own.
        record.recordAnswer(slot: "b", detailCode: "ORDER_INPROGRESS", eventInstanceId: nil, at: 300)
        #expect(record.openOrder(slot: "b") == nil)
        #expect(record.orders?.count == 2)

        // An answer about an order that a newer one replaced changes nothing.
        record.recordAnswer(slot: "a", detailCode: "TEST_ORDER_PLACED", eventInstanceId: "o2", at: 400)
        record.recordFollowUp(slot: "a", eventInstanceId: "o1", status: "Shipped", open: false, at: 500)
        #expect(record.openOrder(slot: "a")?.eventInstanceId == "o2")
        #expect(record.orders?.first?.status == "Processing")

        record.recordTestOrdersCancelled(slots: ["a", "b"], at: 600)
        #expect(record.openOrder(slot: "a") == nil)
        #expect(record.orders?.last?.status == "Cancelled" && record.orders?.last?.open == false)
    }

    @Test func theHistoryKeepsTheNewestTwentyAndDeregistrationClosesEverything() {
        var record = Outbox()
        for index in 0..<25 {
            record.recordAnswer(
                slot: "a", detailCode: "STANDARD_ORDER_PLACED", eventInstanceId: "o\(index)", at: Double(index))
        }
        #expect(record.orders?.count == Outbox.orderHistoryLimit)
        #expect(record.orders?.first?.eventInstanceId == "o5" && record.orders?.last?.eventInstanceId == "o24")
        _ = record.accept(slot: "a", at: 30)
        #expect(record.forgetAccount(reason: "deregistered", at: 31) == ["a"])
        #expect(record.openOrder(slot: "a") == nil)
        #expect(record.orders?.last?.detailCode == OrderRecord.notSent && record.orders?.last?.answeredAt == 31)
        #expect(record.entries.isEmpty, "the queued presses go")
        #expect(record.orders?.count == 20 && record.orders?.allSatisfy { !$0.open } == true)
        #expect(record.slots["a"]?.lastResult == "STANDARD_ORDER_PLACED")
    }
}

/// Slot status from the slot's own quantities, with a date from the observed consumption rate.
@Suite(.tags(.unit)) struct ConsumptionRateTests {
    let day = 86400.0

    @Test func theExpectedDateFollowsTheObservedRate() throws {
        // One consumption: the rate is unknown, a month is assumed.
        let first = try #require(ConsumptionRate.report(history: [0], quantity: 10, remainingWhenLow: 2))
        #expect(first == SlotStatusReport(remaining: 2, original: 10, lastUse: 0, expectedReplenishment: 30 * day))
        // Every 10 and 14 days: the next in 12.
        let history = [0, 10 * day, 24 * day]
        let report = try #require(ConsumptionRate.report(history: history, quantity: 10, remainingWhenLow: 0))
        #expect(report.expectedReplenishment == 24 * day + 12 * day)
        #expect(report.lastUse == 24 * day)
        // Without quantities the unit is one refill.
        let plain = try #require(ConsumptionRate.report(history: history, quantity: nil, remainingWhenLow: 0))
        #expect(plain.original == 1 && plain.remaining == 0)
        #expect(ConsumptionRate.report(history: [], quantity: 1, remainingWhenLow: 0) == nil)
    }

    @Test func flickerIsNotARateAndAClockSetBackStartsAgain() {
        // A sensor that crossed its mark twice within minutes: one consumption, not a rate.
        #expect(ConsumptionRate.meanInterval([0, 60]) == nil)
        #expect(ConsumptionRate.meanInterval([0, 60, 10 * day + 60]) == 10 * day)
        // Each press a new entry (the one before it answered), so each is a consumption.
        var outbox = Outbox()
        for time in stride(from: 0.0, through: 10 * day, by: day) {
            #expect(outbox.accept(slot: "s", at: time) == .queued)
            outbox.recordAnswer(slot: "s", detailCode: "ORDER_INPROGRESS", eventInstanceId: nil, at: time)
        }
        let history = outbox.slots["s"]?.consumedAt ?? []
        #expect(history.count == ConsumptionRate.historyLimit && history.last == 10 * day)
        // A press counted on a pending entry consumed nothing more; a level sensor's low did.
        #expect(outbox.accept(slot: "s", at: 10 * day + 1) == .queued)
        #expect(outbox.accept(slot: "s", at: 10 * day + 2) == .coalesced)
        #expect(outbox.slots["s"]?.consumedAt?.last == 10 * day + 1)
        #expect(outbox.slots["s"]?.sensorOrderedWhileLow == nil)
        #expect(outbox.accept(slot: "s", at: 10 * day + 3, fromSensor: true) == .coalesced)
        #expect(outbox.slots["s"]?.consumedAt?.last == 10 * day + 3)
        #expect(outbox.slots["s"]?.sensorOrderedWhileLow == true)
        outbox.recordAnswer(slot: "s", detailCode: "ORDER_INPROGRESS", eventInstanceId: nil, at: 10 * day + 4)
        #expect(outbox.accept(slot: "s", at: 5) == .queued)
        #expect(outbox.slots["s"]?.consumedAt == [5])
    }
}
