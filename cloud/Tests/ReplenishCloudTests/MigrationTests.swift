import Foundation
import Logging
import PostgresNIO
import Testing

@testable import ReplenishCloud

/// The schema's version: applied once, again without change, and a newer database refused.
@Suite(.serialized) struct MigrationTests {
    @Test func theSchemaIsAppliedOnceAndANewerDatabaseRefused() async throws {
        try await TestDatabase.with(copies: 2) { clients in
            // Already applied by TestDatabase: both copies apply again, together, and nothing changes.
            async let first = Migrations.apply(client: clients[0], logger: TestDatabase.logger)
            async let second = Migrations.apply(client: clients[1], logger: TestDatabase.logger)
            #expect(try await [first, second] == [Migrations.current, Migrations.current])
            let version = try await clients[0].query("SELECT version FROM schema_version").decode(Int.self)
                .reduce(into: [Int]()) { $0.append($1) }
            #expect(version == [Migrations.current])
            try await clients[0].query("UPDATE schema_version SET version = 99")
            let error = await #expect(throws: CloudError.self) {
                try await Migrations.apply(client: clients[0], logger: TestDatabase.logger)
            }
            #expect(error?.code == .databaseTooNew)
        }
    }

    @Test func aDatabaseThatDoesNotAnswerStopsTheStartWithThatSaid() async throws {
        // A port nothing listens on: the client retries its connection; the start gives up after its limit.
        let quiet = {
            var logger = Logger(label: "replenish-cloud-test-unreachable")
            logger.logLevel = .critical
            return logger
        }()
        let client = PostgresClient(
            configuration: try CloudSettings.database(url: "postgres://nobody@127.0.0.1:9/none?sslmode=disable"),
            backgroundLogger: quiet)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            let error = await #expect(throws: CloudError.self) {
                try await CloudService.migrate(client: client, within: .milliseconds(500), logger: quiet)
            }
            #expect(error?.code == .upstream)
            #expect(error?.message.contains("did not answer") == true)
        }
    }
}
