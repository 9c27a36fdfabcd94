import Foundation
import PostgresNIO
import Testing

@testable import ReplenishCloud

/// The queued events sent to the gateway: throttling, a token the gateway refuses, an expired grant, and a
/// customer who disabled the skill.
@Suite(.serialized) struct SenderTests {
    static let now = Date(timeIntervalSince1970: 1_795_000_000)

    static func oneQueuedPress(_ store: CloudStore) async throws {
        try await ReportTests.boundUnit(store)
        // The claim's AddOrUpdateReport is sent first, out of the way.
        _ = try await EventSender(store: store, gateway: FakeGateway(), lwa: FakeLWA(), logger: TestDatabase.logger)
            .sendDue(now: { now })
        _ = try await store.apply(
            try UnitReport(parsing: Fixtures.report(sequence: 1, usage: 1), unit: Fixtures.unit), receivedAt: now)
    }

    @Test func aThrottledGatewayGetsTheEventAgainAfterItsRetryAfter() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            try await Self.oneQueuedPress(store)
            let gateway = FakeGateway()
            gateway.state.withLock { $0.outcomes = [.retry(after: .seconds(30), reason: "THROTTLING_EXCEPTION")] }
            let sender = EventSender(store: store, gateway: gateway, lwa: FakeLWA(), logger: TestDatabase.logger)
            #expect(try await sender.sendDue(now: { Self.now }).retried == 1)
            #expect(try await sender.sendDue(now: { Self.now.addingTimeInterval(29) }) == .init())
            #expect(try await sender.sendDue(now: { Self.now.addingTimeInterval(30) }).sent == 1)
            #expect(gateway.names() == ["InventoryConsumed"])
        }
    }

    @Test func aTokenTheGatewayRefusesIsRefreshedAndTheEventSentOnce() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            try await Self.oneQueuedPress(store)
            let gateway = FakeGateway()
            gateway.state.withLock { $0.invalidTokens = ["gw-a"] }
            let lwa = FakeLWA()
            let pass = try await EventSender(store: store, gateway: gateway, lwa: lwa, logger: TestDatabase.logger)
                .sendDue(now: { Self.now })
            #expect(pass.sent == 1)
            #expect(lwa.state.withLock { $0.refreshes } == 1)
            #expect(gateway.accepted.map { $0.at("event.endpoint.scope.token") } == ["gw-access-1"])
        }
    }

    @Test func aGrantAboutToExpireIsRefreshedBeforeSending() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            try await Self.oneQueuedPress(store)
            let lwa = FakeLWA()
            let gateway = FakeGateway()
            // The grant was stored at `now` for an hour: 56 minutes later it has under five left.
            _ = try await EventSender(store: store, gateway: gateway, lwa: lwa, logger: TestDatabase.logger)
                .sendDue(now: { Self.now.addingTimeInterval(56 * 60) })
            #expect(lwa.state.withLock { $0.refreshes } == 1)
            #expect(gateway.accepted.map { $0.at("event.endpoint.scope.token") } == ["gw-access-1"])
            let stored = try await clients[0].query("SELECT refresh_token FROM grants").decode(String.self)
                .reduce(into: []) { $0.append($1) }
            #expect(stored == ["gw-refresh-1"])
        }
    }

    @Test func aCustomerWhoDisabledTheSkillLosesTokensAndQueuedEvents() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            try await Self.oneQueuedPress(store)
            _ = try await store.apply(
                try UnitReport(parsing: Fixtures.report(sequence: 2, usage: 1), unit: Fixtures.unit),
                receivedAt: Self.now)
            let gateway = FakeGateway()
            gateway.state.withLock { $0.outcomes = [.skillDisabled] }
            _ = try await EventSender(store: store, gateway: gateway, lwa: FakeLWA(), logger: TestDatabase.logger)
                .sendDue(now: { Self.now })
            #expect(gateway.state.withLock { $0.attempts } == 1)
            #expect(try await clients[0].query("SELECT count(*) FROM grants").decode(Int.self).reduce(0, +) == 0)
            #expect(try await clients[0].query("SELECT count(*) FROM events").decode(Int.self).reduce(0, +) == 0)
            // The unit stays the customer's: enabling the skill again finds it.
            #expect(try await store.unit(Fixtures.unit)?.customer == Fixtures.customer)
        }
    }

    @Test func withoutAGrantTheEventWaitsAndARefusedRefreshDropsTheGrant() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            try await Self.oneQueuedPress(store)
            let lwa = FakeLWA()
            lwa.state.withLock { $0.refuseRefresh = true }
            let gateway = FakeGateway()
            let sender = EventSender(store: store, gateway: gateway, lwa: lwa, logger: TestDatabase.logger)
            let pass = try await sender.sendDue(now: { Self.now.addingTimeInterval(3600) })
            #expect(pass.retried == 1)
            #expect(gateway.state.withLock { $0.attempts } == 0)
            #expect(try await clients[0].query("SELECT count(*) FROM grants").decode(Int.self).reduce(0, +) == 0)
            #expect(try await clients[0].query("SELECT count(*) FROM events").decode(Int.self).reduce(0, +) == 1)
            // A day later, still without a grant, the event is dropped.
            let late = try await sender.sendDue(now: { Self.now.addingTimeInterval(86_400 + 1) })
            #expect(late.dropped == 1)
        }
    }
}
