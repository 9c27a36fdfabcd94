import Foundation
import Testing

@testable import ReplenishAgent

/// The order follow-up on the manual clock: a placed order is asked about every few hours (minutes in the
/// test phase) until DRS says it shipped, and then never again; weeks pass without a call when no order is
/// open.
@Suite struct OrderFollowUpTests {
    let clock = ManualClock()
    let epoch = 1_800_000_000.0

    func service(
        drs: ScriptedHTTPClient, status: StatusBook, phase: AgentConfig.Phase
    ) throws -> OrderFollowUpService<ManualClock> {
        let tokens = try TokenManager(
            store: MemoryTokenStore(
                TokenSet(
                    clientId: "c", refreshToken: Secret("Atzr|r"), accessToken: Secret("Atza|a"),
                    accessTokenExpiresAt: epoch + 365 * 86400, accessTokenLifetime: 365 * 86400)),
            lwa: LWAClient(
                http: ScriptedHTTPClient { _ in json(503, "") },
                tokenURL: try EndpointURL("http://127.0.0.1:1/auth/o2/token"), clientSecret: nil),
            clock: clock, wallTime: clock.wallTime(from: epoch), logger: .init(label: "test"))
        return OrderFollowUpService(
            drs: DRSClient(http: drs, baseURL: try EndpointURL("http://127.0.0.1:1")), tokens: tokens,
            status: status, slots: ["slot-1"], phase: phase, clock: clock, wallTime: clock.wallTime(from: epoch),
            random: .seeded(state: 9), logger: .init(label: "test"))
    }

    func orderInfo(_ status: String) -> HTTPResponse {
        json(
            200,
            #"{"orderInfoData":{"instanceId":"amzn1.dash.v2.o.1","orderItems":[{"asin":"B0","expectedDeliveryDate":null,"quantity":1,"slotId":"slot-1","status":"\#(status)"}]}}"#
        )
    }

    /// Advances the clock `step` seconds at a time for `hours`, letting the service do what each step made due.
    func pass(hours: Int, step: Int = 3600) async {
        _ = await settle({ clock.sleeperCount >= 1 }, attempts: 20_000)
        for _ in 0..<(hours * 3600 / step) {
            clock.advance(by: .seconds(Int64(step)))
            _ = await settle({ clock.sleeperCount >= 1 }, attempts: 20_000)
            for _ in 0..<50 { await Task.yield() }
        }
    }

    @Test func productionAsksEveryFewHoursUntilShippedThenNeverAgain() async throws {
        let shipped = Locked(false)
        let drs = ScriptedHTTPClient { [self] request in
            #expect(request.url.hasSuffix("/getOrderInfo/amzn1.dash.v2.o.1"))
            return orderInfo(shipped.value ? "Shipped" : "Processing")
        }
        let status = try StatusBook(stateDirectory: temporaryDirectory()) { _ in }
        let followUp = try service(drs: drs, status: status, phase: .production)
        let runner = Task { await followUp.run() }
        defer { runner.cancel() }

        // A week with no order placed: not one call.
        await pass(hours: 7 * 24)
        #expect(drs.requests.isEmpty)

        // An order is placed: asked about every 5 to 7 hours.
        try await status.update {
            $0.slots["slot-1"] = .init(lastEventInstanceId: "amzn1.dash.v2.o.1", orderOpen: true)
        }
        await followUp.wake()
        await pass(hours: 2 * 24)
        let twoDays = drs.requests.count
        #expect(twoDays >= 48 / 7 && twoDays <= 48 / 5 + 1, "\(twoDays) calls in two days")
        #expect(await status.record.slots["slot-1"]?.orderStatus == "Processing")
        #expect(await status.record.slots["slot-1"]?.orderOpen == true)

        // Shipped: recorded, and the follow-up stops for good.
        shipped.value = true
        await pass(hours: 8)
        #expect(await status.record.slots["slot-1"]?.orderStatus == "Shipped")
        #expect(await status.record.slots["slot-1"]?.orderOpen == false)
        let atShipping = drs.requests.count
        await pass(hours: 14 * 24)
        #expect(drs.requests.count == atShipping)
    }

    @Test func theTestPhaseAsksEveryFewMinutesAndAFailureBacksOff() async throws {
        let answers = Locked([json(503, ""), json(503, ""), orderInfo("Cancelled")])
        let drs = ScriptedHTTPClient { _ in
            var queue = answers.value
            let next = queue.isEmpty ? json(500, "") : queue.removeFirst()
            answers.value = queue
            return next
        }
        let status = try StatusBook(stateDirectory: temporaryDirectory()) { _ in }
        try await status.update {
            $0.slots["slot-1"] = .init(lastEventInstanceId: "amzn1.dash.v2.o.1", orderOpen: true)
        }
        let followUp = try service(drs: drs, status: status, phase: .test)
        let runner = Task { await followUp.run() }
        defer { runner.cancel() }
        // Minutes, not hours: within an hour the two failures are retried and the cancellation is seen.
        await pass(hours: 1, step: 30)
        #expect(drs.requests.count == 3)
        #expect(await status.record.slots["slot-1"]?.orderStatus == "Cancelled")
        #expect(await status.record.slots["slot-1"]?.orderOpen == false)
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
