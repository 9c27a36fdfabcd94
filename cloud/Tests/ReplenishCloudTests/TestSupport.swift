import Foundation
import Logging
import PostgresNIO
import Synchronization
import Testing

@testable import ReplenishCloud

/// A database of its own for each test, on the real PostgreSQL server scripts/cloud-test.sh starts
/// (`REPLENISH_CLOUD_TEST_DATABASE`): created, migrated, used, dropped.
enum TestDatabase {
    static let logger = Logger(label: "replenish-cloud-test")

    static var url: String {
        get throws {
            guard let url = ProcessInfo.processInfo.environment["REPLENISH_CLOUD_TEST_DATABASE"] else {
                throw CloudError(.badConfig, "REPLENISH_CLOUD_TEST_DATABASE is not set: run scripts/cloud-test.sh")
            }
            return url
        }
    }

    /// Runs `body` with clients of a new, migrated database (`copies` clients: copies of the service).
    static func with<T: Sendable>(
        copies: Int = 1, _ body: @Sendable ([PostgresClient]) async throws -> T
    ) async throws -> T {
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let admin = PostgresClient(configuration: try CloudSettings.database(url: try url), backgroundLogger: logger)
        var configuration = try CloudSettings.database(url: try url)
        configuration.database = name
        let clients = (0..<copies).map { _ in PostgresClient(configuration: configuration, backgroundLogger: logger) }
        return try await withThrowingTaskGroup(of: Void.self, returning: T.self) { group in
            group.addTask { await admin.run() }
            for client in clients { group.addTask { await client.run() } }
            defer { group.cancelAll() }
            try await admin.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
            do {
                try await Migrations.apply(client: clients[0], logger: logger)
                let value = try await body(clients)
                return value
            } catch {
                throw error
            }
        }
    }

    static func store(_ client: PostgresClient) -> CloudStore {
        CloudStore(client: client, catalogue: Fixtures.catalogue, logger: logger)
    }
}

/// The catalogue and units the suites share.
enum Fixtures {
    static let catalogue = Catalogue(
        manufacturer: "Example Appliances",
        models: [
            "coffee-1": .init(
                friendlyName: "Coffee maker", description: "A coffee maker that reorders its pods and filter",
                slots: [
                    .init(
                        slot: "pods", sensor: .usage, measurement: ["@type": "Count"],
                        dashReplenishmentId: "amzn1.dash.v2.o.ci.pods", name: "Coffee pods"),
                    .init(
                        slot: "tank", sensor: .level, measurement: ["@type": "Percentage"],
                        dashReplenishmentId: "amzn1.dash.v2.o.ci.filter", name: "Water filter"),
                ])
        ])
    static let unit = "TEST0001"
    static let key = "00112233445566778899aabbccddeeff"
    static let customer = "amzn1.account.CUSTOMER1"

    static func report(sequence: Int, usage: Int? = nil, level: Double? = nil, daily: Bool = false) -> JSON {
        var supplies: [JSON] = []
        if let usage {
            supplies.append(["slot": "pods", "usage": ["@type": "Count", "value": .number(Double(usage))]])
        }
        if let level {
            supplies.append(
                [
                    "slot": "tank", "level": ["@type": "Percentage", "value": .number(level)],
                    "at": "2026-11-29T09:12:03Z",
                ])
        }
        return [
            "unit": .string(unit), "stream": "9f2c4e1d0a7b3c58", "sequence": .number(Double(sequence)),
            "daily": .bool(daily), "madeAt": "2026-11-29T10:00:00Z", "supplies": .array(supplies),
        ]
    }

    /// The unit registered, a level of 70 % reported before any claim, then claimed by the customer, whose
    /// grant is stored: its AddOrUpdateReport and ChangeReport queued.
    static func claimedAfterALevel(_ store: CloudStore, now: Date) async throws {
        _ = try await store.register(unit: unit, setupKey: key, model: "coffee-1")
        _ = try await store.apply(try UnitReport(parsing: report(sequence: 1, level: 70), unit: unit), receivedAt: now)
        let (nonce, proof) = claim()
        _ = try await store.claim(unit: unit, customer: customer, nonce: nonce, proof: proof, now: now)
        try await store.storeGrant(
            customer: customer, tokens: LWATokens(accessToken: "gw-a", refreshToken: "gw-r", expiresIn: 3600), now: now)
    }

    /// A claim's nonce and proof, made with the label's key as the phone makes them.
    static func claim(customer: String = customer, nonce: String = "0f1e2d3c4b5a69788796a5b4c3d2e1f0") -> (
        String, String
    ) {
        (nonce, ClaimProof(keyHex: key)!.proof(unit: unit, customer: customer, nonce: nonce))
    }
}

/// Every Alexa message a suite saw the service write, kept for scripts/alexa-schema-check.py when
/// `REPLENISH_CLOUD_TEST_MESSAGES` names a folder.
enum MessageLog {
    static func record(_ message: JSON, _ name: String) {
        guard let folder = ProcessInfo.processInfo.environment["REPLENISH_CLOUD_TEST_MESSAGES"] else { return }
        let path = "\(folder)/\(name)-\(UUID().uuidString.prefix(8)).json"
        _ = FileManager.default.createFile(atPath: path, contents: Data(message.text.utf8))
    }
}

/// LWA as the skill meets it, in memory: account-linking tokens to customers, grant codes to tokens, refresh.
final class FakeLWA: LoginWithAmazon, Sendable {
    struct State {
        var customers: [String: String] = ["link-token-1": Fixtures.customer]
        var codes: Set<String> = ["grant-code-1"]
        var refreshes = 0
        var refuseRefresh = false
        var issued = 0
    }
    let state = Mutex(State())

    func exchange(code: String) async throws -> LWATokens {
        try state.withLock { state in
            guard state.codes.remove(code) != nil else { throw LWAFailure.refused("invalid_grant") }
            state.issued += 1
            return LWATokens(
                accessToken: "gw-access-\(state.issued)", refreshToken: "gw-refresh-\(state.issued)", expiresIn: 3600)
        }
    }

    func refresh(refreshToken: String) async throws -> LWATokens {
        try state.withLock { state in
            guard !state.refuseRefresh else { throw LWAFailure.refused("invalid_grant") }
            state.refreshes += 1
            state.issued += 1
            return LWATokens(
                accessToken: "gw-access-\(state.issued)", refreshToken: "gw-refresh-\(state.issued)", expiresIn: 3600)
        }
    }

    func customer(accessToken: String) async throws -> String {
        try state.withLock { state in
            guard let customer = state.customers[accessToken] else { throw LWAFailure.refused("HTTP 401") }
            return customer
        }
    }
}

/// The event gateway in memory: it answers with the outcomes a test queues (accepted when none is queued),
/// refuses tokens it was told are not valid, and keeps what it accepted.
final class FakeGateway: EventGateway, Sendable {
    struct State {
        var outcomes: [GatewayOutcome] = []
        var invalidTokens: Set<String> = []
        var accepted: [JSON] = []
        var attempts = 0
    }
    let state = Mutex(State())

    func send(_ event: JSON, token: String) async -> GatewayOutcome {
        state.withLock { state in
            state.attempts += 1
            if state.invalidTokens.contains(token) { return .invalidToken }
            let outcome = state.outcomes.isEmpty ? .accepted : state.outcomes.removeFirst()
            if outcome == .accepted {
                state.accepted.append(event)
                MessageLog.record(event, event.at("event.header.name")?.string ?? "event")
            }
            return outcome
        }
    }

    var accepted: [JSON] { state.withLock { $0.accepted } }
    func names() -> [String] { accepted.compactMap { $0.at("event.header.name")?.string } }
}
