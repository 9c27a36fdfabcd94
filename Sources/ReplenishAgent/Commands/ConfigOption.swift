import ArgumentParser

/// The option every command takes (`@OptionGroup var options: ConfigOption`): `--config PATH`.
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
