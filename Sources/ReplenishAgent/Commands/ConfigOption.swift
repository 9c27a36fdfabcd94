import ArgumentParser

/// The option every command takes (`@OptionGroup var options: ConfigOption`): `--config PATH`.
struct ConfigOption: ParsableArguments {
    @Option(name: .long, help: "Path of the agent's config file.")
    var config: String = "/etc/replenish-agent/agent.json"

    /// Loads the config, or exits with `exitCode` (1 unless said) and its problems on standard error.
    func load(exitCode: Int32 = 1) throws -> AgentConfig {
        do {
            return try AgentConfig.load(path: config)
        } catch {
            for line in error.problems { Output.error(line) }
            throw ExitCode(exitCode)
        }
    }
}
