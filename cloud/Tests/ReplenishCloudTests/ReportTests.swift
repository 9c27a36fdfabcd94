import Foundation
import PostgresNIO
import Testing

@testable import ReplenishCloud

/// Reports applied once per (unit, stream, sequence), in one transaction with their events, on a real
/// PostgreSQL server.
@Suite(.serialized) struct ReportTests {
    static let now = Date(timeIntervalSince1970: 1_795_000_000)

    /// A registered unit claimed by the customer, whose grant is stored.
    static func boundUnit(_ store: CloudStore) async throws {
        _ = try await store.register(unit: Fixtures.unit, setupKey: Fixtures.key, model: "coffee-1")
        let (nonce, proof) = Fixtures.claim()
        _ = try await store.claim(
            unit: Fixtures.unit, customer: Fixtures.customer, nonce: nonce, proof: proof, now: Self.now)
        try await store.storeGrant(
            customer: Fixtures.customer, tokens: LWATokens(accessToken: "gw-a", refreshToken: "gw-r", expiresIn: 3600),
            now: now)
    }

    static func queued(_ client: PostgresClient, name: String) async throws -> Int {
        try await client.query("SELECT count(*) FROM events WHERE name = \(name)").decode(Int.self).reduce(0, +)
    }

    @Test func aPressIsOneInventoryConsumedThoughItsReportComesTwice() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            try await Self.boundUnit(store)
            let report = try UnitReport(parsing: Fixtures.report(sequence: 1, usage: 1), unit: Fixtures.unit)
            let first = try await store.apply(report, receivedAt: Self.now)
            let again = try await store.apply(report, receivedAt: Self.now)
            #expect(first == .init(sequence: 1, claimed: true, applied: true))
            #expect(again == .init(sequence: 1, claimed: true, applied: false))
            #expect(try await Self.queued(clients[0], name: "InventoryConsumed") == 1)
            let gateway = FakeGateway()
            let sender = EventSender(store: store, gateway: gateway, lwa: FakeLWA(), logger: TestDatabase.logger)
            let pass = try await sender.sendDue(now: { Self.now })
            #expect(gateway.names().filter { $0 == "InventoryConsumed" }.count == 1)
            #expect(pass.sent == gateway.accepted.count)
            let consumed = try #require(gateway.accepted.first { $0.at("event.header.name") == "InventoryConsumed" })
            #expect(consumed.at("event.payload.usage") == ["@type": "Count", "value": 1])
            #expect(consumed.at("event.header.instance") == "InventoryUsageSensor-pods")
            #expect(consumed.at("event.endpoint.scope.token") == "gw-a")
            #expect(try await Self.queued(clients[0], name: "InventoryConsumed") == 0)
        }
    }

    @Test func twoCopiesGivenTheSameReportApplyItOnce() async throws {
        try await TestDatabase.with(copies: 2) { clients in
            let stores = clients.map(TestDatabase.store)
            try await Self.boundUnit(stores[0])
            let report = try UnitReport(parsing: Fixtures.report(sequence: 1, usage: 2), unit: Fixtures.unit)
            let applied = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<16 {
                    group.addTask { try await stores[index % 2].apply(report, receivedAt: Self.now).applied }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(applied == 1)
            #expect(try await Self.queued(clients[1], name: "InventoryConsumed") == 1)
        }
    }

    @Test func aLevelBecomesAChangeReportAndTheDailyReportAPeriodicOne() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            try await Self.boundUnit(store)
            _ = try await store.apply(
                try UnitReport(parsing: Fixtures.report(sequence: 1, level: 40), unit: Fixtures.unit),
                receivedAt: Self.now)
            _ = try await store.apply(
                try UnitReport(parsing: Fixtures.report(sequence: 2, level: 35, daily: true), unit: Fixtures.unit),
                receivedAt: Self.now)
            let gateway = FakeGateway()
            _ = try await EventSender(store: store, gateway: gateway, lwa: FakeLWA(), logger: TestDatabase.logger)
                .sendDue(now: { Self.now })
            let changes = gateway.accepted.filter { $0.at("event.header.name") == "ChangeReport" }
            #expect(
                changes.map { $0.at("event.payload.change.cause.type") } == ["PHYSICAL_INTERACTION", "PERIODIC_POLL"])
            let property = try #require(changes[0].at("event.payload.change.properties")?.array?.first)
            #expect(property["value"] == ["@type": "Percentage", "value": 40])
            #expect(property["instance"] == "InventoryLevelSensor-tank")
            #expect(property["timeOfSample"] == "2026-11-29T09:12:03Z")
        }
    }

    @Test func anUnclaimedUnitsReportIsAppliedAndToldToNoOne() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            _ = try await store.register(unit: Fixtures.unit, setupKey: Fixtures.key, model: "coffee-1")
            let answer = try await store.apply(
                try UnitReport(parsing: Fixtures.report(sequence: 1, usage: 1, level: 50), unit: Fixtures.unit),
                receivedAt: Self.now)
            #expect(answer == .init(sequence: 1, claimed: false, applied: true))
            #expect(try await clients[0].query("SELECT count(*) FROM events").decode(Int.self).reduce(0, +) == 0)
            #expect(try await clients[0].query("SELECT count(*) FROM levels").decode(Int.self).reduce(0, +) == 1)
        }
    }

    @Test func aRevokedOrUnknownUnitIsRefusedAndNothingIsKept() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            let report = try UnitReport(parsing: Fixtures.report(sequence: 1, usage: 1), unit: Fixtures.unit)
            await #expect(throws: CloudError.self) { try await store.apply(report, receivedAt: Self.now) }
            _ = try await store.register(unit: Fixtures.unit, setupKey: Fixtures.key, model: "coffee-1")
            try await store.revoke(unit: Fixtures.unit)
            let error = await #expect(throws: CloudError.self) { try await store.apply(report, receivedAt: Self.now) }
            #expect(error?.code == .forbidden)
            #expect(try await clients[0].query("SELECT count(*) FROM reports").decode(Int.self).reduce(0, +) == 0)
        }
    }

    @Test func theFactoryCannotRegisterAUnitTwiceWithAnotherKey() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            let first = try await store.register(unit: Fixtures.unit, setupKey: Fixtures.key, model: "coffee-1")
            let again = try await store.register(unit: Fixtures.unit, setupKey: Fixtures.key, model: "coffee-1")
            #expect(first && again)
            let error = await #expect(throws: CloudError.self) {
                try await store.register(
                    unit: Fixtures.unit, setupKey: String(repeating: "ab", count: 16), model: "coffee-1")
            }
            #expect(error?.code == .conflict)
            let kept = try await store.unit(Fixtures.unit)?.setupKey
            #expect(kept == Fixtures.key)
        }
    }
}
