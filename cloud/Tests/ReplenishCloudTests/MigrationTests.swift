import Foundation
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
}
