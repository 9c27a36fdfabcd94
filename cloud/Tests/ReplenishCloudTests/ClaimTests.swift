import Foundation
import PostgresNIO
import Testing

@testable import ReplenishCloud

/// A customer's claim proven with the label's key, and the release that unbinds the unit.
@Suite(.serialized) struct ClaimTests {
    static let now = Date(timeIntervalSince1970: 1_795_000_000)

    static func bindings(_ client: PostgresClient) async throws -> Int {
        try await client.query("SELECT count(*) FROM bindings").decode(Int.self).reduce(0, +)
    }

    @Test func aWrongProofAReplayedNonceOrAnotherCustomerChangesNothing() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            _ = try await store.register(unit: Fixtures.unit, setupKey: Fixtures.key, model: "coffee-1")
            let (nonce, proof) = Fixtures.claim()
            let wrongKey = ClaimProof(keyHex: String(repeating: "cd", count: 16))!
                .proof(unit: Fixtures.unit, customer: Fixtures.customer, nonce: nonce)
            var error = await #expect(throws: CloudError.self) {
                try await store.claim(
                    unit: Fixtures.unit, customer: Fixtures.customer, nonce: nonce, proof: wrongKey, now: Self.now)
            }
            #expect(error?.code == .forbidden)
            // The proof is bound to the customer: another customer cannot reuse it.
            error = await #expect(throws: CloudError.self) {
                try await store.claim(
                    unit: Fixtures.unit, customer: "amzn1.account.OTHER", nonce: nonce, proof: proof, now: Self.now)
            }
            #expect(error?.code == .forbidden)
            #expect(try await Self.bindings(clients[0]) == 0)
            #expect(
                try await store.claim(
                    unit: Fixtures.unit, customer: Fixtures.customer, nonce: nonce, proof: proof, now: Self.now))
            error = await #expect(throws: CloudError.self) {
                try await store.claim(
                    unit: Fixtures.unit, customer: Fixtures.customer, nonce: nonce, proof: proof, now: Self.now)
            }
            #expect(error?.code == .conflict)
            let (otherNonce, otherProof) = Fixtures.claim(
                customer: "amzn1.account.OTHER", nonce: "aaaabbbbccccddddeeeeffff00001111")
            error = await #expect(throws: CloudError.self) {
                try await store.claim(
                    unit: Fixtures.unit, customer: "amzn1.account.OTHER", nonce: otherNonce, proof: otherProof,
                    now: Self.now)
            }
            #expect(error?.code == .conflict)
            #expect(try await store.unit(Fixtures.unit)?.customer == Fixtures.customer)
        }
    }

    @Test func aClaimTellsAlexaOfTheUnitAndAReleaseRemovesIt() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            try await Fixtures.claimedAfterALevel(store, now: Self.now)
            // Another customer cannot release it.
            let error = await #expect(throws: CloudError.self) {
                try await store.release(unit: Fixtures.unit, customer: "amzn1.account.OTHER", now: Self.now)
            }
            #expect(error?.code == .forbidden)
            try await store.release(unit: Fixtures.unit, customer: Fixtures.customer, now: Self.now)
            #expect(try await Self.bindings(clients[0]) == 0)
            let gateway = FakeGateway()
            _ = try await EventSender(store: store, gateway: gateway, lwa: FakeLWA(), logger: TestDatabase.logger)
                .sendDue(now: { Self.now })
            // The release dropped the unit's queued events; the DeleteReport alone goes.
            #expect(gateway.names() == ["DeleteReport"])
            let delete = try #require(gateway.accepted.first)
            #expect(delete.at("event.payload.scope.token") == "gw-a")
            #expect(delete.at("event.payload.endpoints") == [["endpointId": .string(Fixtures.unit)]])
        }
    }

    @Test func aClaimedUnitIsAnnouncedWithItsLevels() async throws {
        try await TestDatabase.with { clients in
            let store = TestDatabase.store(clients[0])
            try await Fixtures.claimedAfterALevel(store, now: Self.now)
            let gateway = FakeGateway()
            _ = try await EventSender(store: store, gateway: gateway, lwa: FakeLWA(), logger: TestDatabase.logger)
                .sendDue(now: { Self.now })
            #expect(gateway.names() == ["AddOrUpdateReport", "ChangeReport"])
            let endpoint = try #require(gateway.accepted.first?.at("event.payload.endpoints")?.array?.first)
            let interfaces = endpoint["capabilities"]?.array?.compactMap { $0["interface"]?.string }
            #expect(interfaces == ["Alexa", "Alexa.InventoryUsageSensor", "Alexa.InventoryLevelSensor"])
        }
    }
}
