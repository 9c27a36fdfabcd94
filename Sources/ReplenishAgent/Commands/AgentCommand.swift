import ArgumentParser

/// `replenish-agent`: the device agent. See CONTRACT.md for the commands' promises.
@main
struct AgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replenish-agent",
        abstract: "Dash Replenishment device agent: pairs with the customer's Amazon account and orders on a press.",
        subcommands: [
            RunCommand.self, PressCommand.self, StatusCommand.self, CheckConfigCommand.self, LevelCommand.self,
            GPIOWatchCommand.self, ResetCommand.self,
        ])
}

/// The flag every command takes.
struct ConfigOption: ParsableArguments {
    @Option(name: .long, help: "Path of the agent's config file.")
    var config: String = "/etc/replenish-agent/agent.json"

    /// Loads the config, or exits non-zero with its problems on standard error.
    func load() throws -> AgentConfig {
        do {
            return try AgentConfig.load(path: config)
        } catch {
            for line in error.problems { Output.error(line) }
            throw ExitCode(1)
        }
    }
}
