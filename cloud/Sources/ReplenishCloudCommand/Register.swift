import ArgumentParser
import Foundation
import Logging
import PostgresNIO
import ReplenishCloud

/// `replenish-cloud register FILE`: the factory's units, one per line (`UNIT SETUP_KEY MODEL`), with the key
/// printed on each label. A unit registered already with the same key and model is unchanged; with another key
/// or model the line is refused and the command fails, so a mislabelled unit is caught at the line.
struct Register: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Register the factory's units and their labels' keys.")

    @OptionGroup var options: DatabaseOptions

    @Argument(help: "The units: lines of UNIT SETUP_KEY MODEL ('-' for standard input).")
    var file: String

    func run() async throws {
        let logger = makeLogger()
        let text: String
        if file == "-" {
            text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        } else {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw ValidationError("\(file) cannot be read")
            }
            text = String(decoding: data, as: UTF8.self)
        }
        let client = PostgresClient(
            configuration: try CloudSettings.database(url: try options.databaseURL()), backgroundLogger: logger)
        let store = CloudStore(client: client, catalogue: try options.loadCatalogue(), logger: logger)
        var failed = 0
        var registered = 0
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            try await Migrations.apply(client: client, logger: logger)
            for (index, line) in text.split(separator: "\n").enumerated() {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
                guard !fields.isEmpty, !fields[0].hasPrefix("#") else { continue }
                do {
                    guard fields.count == 3 else { throw CloudError(.badRequest, "a line is UNIT SETUP_KEY MODEL") }
                    _ = try await store.register(unit: fields[0], setupKey: fields[1], model: fields[2])
                    registered += 1
                } catch {
                    failed += 1
                    FileHandle.standardError.write(Data("line \(index + 1): \(error)\n".utf8))
                }
            }
        }
        print("\(registered) registered, \(failed) refused")
        if failed > 0 { throw ExitCode(1) }
    }
}
