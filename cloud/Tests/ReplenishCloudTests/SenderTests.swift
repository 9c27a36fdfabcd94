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

    @Test func anEventWaitsForTheOlderOneOfItsUnit() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            try await Fixtures.claimedAfterALevel(store, now: Self.now)
            // The unit's AddOrUpdateReport is throttled: its ChangeReport, queued after it, waits.
            let gateway = FakeGateway()
            gateway.state.withLock { $0.outcomes = [.retry(after: .seconds(30), reason: "THROTTLING_EXCEPTION")] }
            let sender = EventSender(store: store, gateway: gateway, lwa: FakeLWA(), logger: TestDatabase.logger)
            let first = try await sender.sendDue(now: { Self.now })
            #expect(first == .init(sent: 0, retried: 1, dropped: 0))
            #expect(gateway.state.withLock { $0.attempts } == 1)
            _ = try await sender.sendDue(now: { Self.now.addingTimeInterval(30) })
            #expect(gateway.names() == ["AddOrUpdateReport", "ChangeReport"])
        }
    }

    @Test func twoCopiesSendingForTwoCustomersSendEachEventOnce() async throws {
        try await TestDatabase.with(copies: 2) { clients in
            let stores = clients.map(TestDatabase.store)
            let customers = ["amzn1.account.A", "amzn1.account.B"]
            for (index, customer) in customers.enumerated() {
                let unit = "UNIT000\(index)"
                _ = try await stores[0].register(unit: unit, setupKey: Fixtures.key, model: "coffee-1")
                let nonce = String(repeating: "\(index)", count: 32)
                let proof = ClaimProof(keyHex: Fixtures.key)!.proof(unit: unit, customer: customer, nonce: nonce)
                _ = try await stores[0].claim(unit: unit, customer: customer, nonce: nonce, proof: proof, now: Self.now)
                // The grants are about to expire: every pass refreshes them, the grant rows locked.
                try await stores[0].storeGrant(
                    customer: customer,
                    tokens: LWATokens(accessToken: "gw-\(index)", refreshToken: "r-\(index)", expiresIn: 60),
                    now: Self.now)
                for sequence in 1...5 {
                    var report = Fixtures.report(sequence: sequence, usage: 1)
                    if case .object(var members) = report {
                        members["unit"] = .string(unit)
                        report = .object(members)
                    }
                    _ = try await stores[index].apply(try UnitReport(parsing: report, unit: unit), receivedAt: Self.now)
                }
            }
            let gateway = FakeGateway()
            let lwa = FakeLWA()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for round in 0..<8 {
                    group.addTask {
                        _ = try await EventSender(
                            store: stores[round % 2], gateway: gateway, lwa: lwa, logger: TestDatabase.logger
                        ).sendDue(now: { Self.now }, batch: 2)
                    }
                }
                try await group.waitForAll()
            }
            _ = try await EventSender(store: stores[1], gateway: gateway, lwa: lwa, logger: TestDatabase.logger)
                .sendDue(now: { Self.now.addingTimeInterval(Double(EventSender.lease)) })
            let ids = gateway.accepted.compactMap { $0.at("event.header.messageId")?.string }
            #expect(ids.count == 12)  // per customer: its AddOrUpdateReport and 5 InventoryConsumed
            #expect(Set(ids).count == ids.count)
            #expect(try await clients[0].query("SELECT count(*) FROM events").decode(Int.self).reduce(0, +) == 0)
        }
    }
}
