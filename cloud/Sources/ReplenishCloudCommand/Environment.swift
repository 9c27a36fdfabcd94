import ArgumentParser
import Foundation
import Logging
import ReplenishCloud

/// The options every command shares: the database, and the catalogue of models.
struct DatabaseOptions: ParsableArguments {
    @Option(help: "The database: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE (default: $REPLENISH_CLOUD_DATABASE).")
    var database: String?

    @Option(help: "The catalogue of models, a JSON file (default: $REPLENISH_CLOUD_CATALOGUE).")
    var catalogue: String?

    func databaseURL() throws -> String {
        guard let url = database ?? environment("REPLENISH_CLOUD_DATABASE") else {
            throw ValidationError("give --database or set REPLENISH_CLOUD_DATABASE")
        }
        return url
    }

    func loadCatalogue() throws -> Catalogue {
        guard let path = catalogue ?? environment("REPLENISH_CLOUD_CATALOGUE") else {
            throw ValidationError("give --catalogue or set REPLENISH_CLOUD_CATALOGUE")
        }
        return try Catalogue.load(path: path)
    }
}

func environment(_ name: String) -> String? {
    ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 }
}

func makeLogger() -> Logger {
    var logger = Logger(label: "replenish-cloud")
    logger.logLevel = environment("LOG_LEVEL").flatMap(Logger.Level.init(rawValue:)) ?? .info
    return logger
}
