import ArgumentParser

/// `check-config`: every problem of the config, the board file and the state directory, one a line.
struct CheckConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate the config and board files and the state directory's permissions (exit 1 on any problem).")

    @OptionGroup var options: ConfigOption

    func run() async throws {
        var problems = Problems()
        let config = AgentConfig.parse(path: options.config, problems: &problems)
        var lines = problems.lines
        if let config {
            do { lines += try StateDirectory.problems(config.stateDirectory) } catch {
                lines.append("stateDirectory: \(error.message)")
            }
        }
        for line in lines { Output.error(line) }
        guard lines.isEmpty else { throw ExitCode(1) }
        Output.line("config OK: \(options.config)")
    }
}
