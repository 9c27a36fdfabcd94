import ArgumentParser
import Logging

/// `run`: the daemon, until SIGTERM/SIGINT.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run", abstract: "Run the agent: GPIO, pairing, token refresh, ordering, duties.")

    @OptionGroup var options: ConfigOption

    @Option(name: .long, help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: Logger.Level = .info

    func run() async throws {
        POSIX.unblockAllSignals()
        let config = try options.load()
        let level = logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "replenish-agent")
        do {
            try await Agent(config: config, logger: logger).run()
        } catch let error as AgentError {
            Output.error("replenish-agent: \(error.message)")
            throw ExitCode(1)
        }
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
