import ArgumentParser
import FoundationEssentials

/// `level INPUT low|full`: sets a level sensor of the running agent on the simulated board.
struct LevelCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "level",
        abstract: "Simulated board only: set a level sensor (float switch) of the running agent low or full.")

    @OptionGroup var options: ConfigOption

    @Argument(help: "The level input's name in the board file.")
    var input: String

    /// What the sensor reads.
    enum Level: String, CaseIterable, ExpressibleByArgument, Sendable {
        /// Running out: the sensor is active.
        case low
        case full
    }

    @Argument(help: "low (running out: the sensor is active) or full.")
    var level: Level

    func run() async throws {
        let config = try options.load()
        struct Body: Encodable {
            var input: String
            var active: Bool
        }
        let body = try JSONEncoder().encode(Body(input: input, active: level == .low))
        try ControlClient.send("level", path: "/level", body: Array(body), config: config, timeoutSeconds: 10)
    }
}
