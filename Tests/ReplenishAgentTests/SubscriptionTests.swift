import Foundation
import Testing

@testable import ReplenishAgent

/// `subscriptionInfo` @2.0 and @1.0, and the re-check a press makes for a slot marked unsubscribed, on the
/// manual clock.
@Suite(.tags(.unit)) struct SubscriptionTests {
    let clock = ManualClock()
    let epoch = 1_800_000_000.0

    @Test func bothAnswerVersionsAreRead() throws {
        let v2 = try SubscriptionInfo.decode(
            Array(
                #"{"slotsSubscriptionStatus":{"a":{"subscribed":true,"productInfoList":[{"asin":"B0EXAMPLE1","quantity":2,"unit":"count"}]},"b":{"subscribed":false}}}"#
                    .utf8))
        #expect(
            v2.slots["a"] == .init(subscribed: true, products: [.init(asin: "B0EXAMPLE1", quantity: 2, unit: "count")]))
        #expect(v2.slots["b"] == .init(subscribed: false))
        let v1 = try SubscriptionInfo.decode(Array(#"{"slotsSubscriptionStatus":{"a":true,"b":false}}"#.utf8))
        #expect(v1.slots == ["a": .init(subscribed: true), "b": .init(subscribed: false)])
        for bad in ["", "{}", #"{"slotsSubscriptionStatus":{"a":"yes"}}"#, #"{"slotsSubscriptionStatus":{"a":{}}}"#] {
            #expect(throws: AgentError.self, "\(bad)") { try SubscriptionInfo.decode(Array(bad.utf8)) }
        }
        #expect(StatusCommand.describe(.init(asin: "B0EXAMPLE1", quantity: 2, unit: "count")) == "B0EXAMPLE1 (2 count)")
        #expect(StatusCommand.describe(.init(asin: "B0EXAMPLE2", quantity: 1.5, unit: nil)) == "B0EXAMPLE2 (1.5)")
    }

    @Test func aPressOnAnUnsubscribedSlotAsksDRSAgainAtMostOnceAMinute() async throws {
        let subscribed = Locked(false)
        let drs = ScriptedHTTPClient { request in
            guard request.url.hasSuffix("/subscriptionInfo") else { return json(200, "{}") }
            let value = subscribed.value
            return json(
                200,
                #"{"slotsSubscriptionStatus":{"slot-1":{"subscribed":\#(value),"productInfoList":[{"asin":"B0EXAMPLE1","quantity":1,"unit":"count"}]}}}"#
            )
        }
        let directory = temporaryDirectory()
        var record = SubscriptionRecord()
        record.slots["slot-1"] = .init(subscribed: false)
        try DiskLane.saveNow(record, to: SubscriptionBook.path(stateDirectory: directory))
        let status = try SubscriptionBook(stateDirectory: directory) { _ in }
        let tokens = try TokenManager(
            store: MemoryTokenStore(
                TokenSet(
                    clientId: "c", refreshToken: Secret("Atzr|r"), accessToken: Secret("Atza|a"),
                    accessTokenExpiresAt: epoch + 3600, accessTokenLifetime: 3600)),
            lwa: LWAClient(
                http: ScriptedHTTPClient { _ in json(503, "") },
                tokenURL: try EndpointURL("http://127.0.0.1:1/auth/o2/token"), clientSecret: nil),
            clock: clock, wallTime: clock.wallTime(from: epoch), logger: .init(label: "test"))
        let (_, subscriptions) = try Duties.testing(
            drs: drs, tokens: tokens, status: status, slots: ["slot-1"], clock: clock,
            wallTime: clock.wallTime(from: epoch))
        let calls = { drs.requests.filter { $0.url.hasSuffix("/subscriptionInfo") }.count }

        // Still unsubscribed: asked once, the answer recorded.
        #expect(await subscriptions.allowsPress(slot: "slot-1") == false)
        #expect(calls() == 1)
        #expect(
            drs.requests.last?.headers.contains {
                $0 == ("x-amzn-accept-type", "com.amazon.dash.replenishment.DrsSubscriptionInfoResult@2.0")
            } == true)
        // Pressed again and again within the minute: no more calls.
        subscribed.value = true
        for _ in 0..<5 {
            clock.advance(by: .seconds(10))
            #expect(await subscriptions.allowsPress(slot: "slot-1") == false, "the recorded answer stands")
        }
        #expect(calls() == 1)
        // A minute after the last check: asked again, subscribed now, products recorded for `status`.
        clock.advance(by: .seconds(10))
        #expect(await subscriptions.allowsPress(slot: "slot-1") == true)
        #expect(calls() == 2)
        #expect(await status.record.slots["slot-1"]?.subscribed == true)
        #expect(
            await status.record.slots["slot-1"]?.products == [.init(asin: "B0EXAMPLE1", quantity: 1, unit: "count")])
        // Subscribed: a press is let through without a question.
        #expect(await subscriptions.allowsPress(slot: "slot-1") == true)
        #expect(calls() == 2)
        // DRS refuses an order as not subscribed (an order parked): recorded, and the next press within the
        // minute is refused without a question.
        await subscriptions.refused(slot: "slot-1")
        #expect(await status.record.slots["slot-1"]?.subscribed == false)
        #expect(await subscriptions.allowsPress(slot: "slot-1") == false)
        #expect(calls() == 2)
    }
}
