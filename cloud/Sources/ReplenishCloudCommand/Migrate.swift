import ArgumentParser
import Logging
import PostgresNIO
import ReplenishCloud

/// `replenish-cloud migrate`: brings the database to this build's schema version (each copy also does at its
/// start) and prints it.
struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Bring the database to this build's schema.")

    @Option(help: "The database (default: $REPLENISH_CLOUD_DATABASE).")
    var database: String?

    func run() async throws {
        guard let url = database ?? environment("REPLENISH_CLOUD_DATABASE") else {
            throw ValidationError("give --database or set REPLENISH_CLOUD_DATABASE")
        }
        let logger = makeLogger()
        let client = PostgresClient(configuration: try CloudSettings.database(url: url), backgroundLogger: logger)
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            print("schema version \(try await Migrations.apply(client: client, logger: logger))")
        }
    }
}
