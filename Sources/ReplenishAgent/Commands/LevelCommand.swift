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

    @Argument(help: "low (running out: the sensor is active) or full.")
    var level: String

    func validate() throws {
        guard ["low", "full"].contains(level) else { throw ValidationError("the level must be low or full") }
    }

    func run() async throws {
        let config = try options.load()
        struct Body: Encodable {
            var input: String
            var active: Bool
        }
        let body = try JSONEncoder().encode(Body(input: input, active: level == "low"))
        try ControlClient.send("level", path: "/level", body: Array(body), config: config, timeoutSeconds: 10)
    }
}
