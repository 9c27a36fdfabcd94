import ArgumentParser
import Logging

/// `run`: the daemon, until SIGTERM/SIGINT.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run", abstract: "Run the agent: GPIO, pairing, token refresh, ordering, duties.")

    @OptionGroup var options: ConfigOption

    @Option(name: .long, help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: LogLevel = .info

    /// The exit status of a `run` that cannot start because of its configuration (the config or board file, a
    /// placeholder left in, a serial file missing, a state directory path too long): sysexits' `EX_CONFIG`. The
    /// unit's `RestartPreventExitStatus=78` keeps systemd from restarting it every 5 s until someone edits the
    /// config; every other failure (exit 1) is restarted.
    static let configurationExitCode: Int32 = 78

    func run() async throws {
        POSIX.installCrashReport(build: BuildInfo.description)
        POSIX.unblockAllSignals()
        // Everything the daemon creates is private from the moment it exists, whatever umask it was started
        // with: the control socket is bound before it can be chmod-ed, and a SIGKILL in between must not leave
        // a file that group or others can reach (systemd's unit sets UMask=0077 as well).
        POSIX.setFileCreationMask(0o077)
        // No core dumps, whoever started it: one would hold the tokens (the unit also sets LimitCORE=0). A core
        // pipe ignores that limit, and the agent's own user could still ptrace it or read /proc/<pid>/mem: not
        // dumpable closes both.
        POSIX.disableCoreDumps()
        let notDumpable = POSIX.disableDumping()
        let config = try options.load(exitCode: Self.configurationExitCode)
        let level = logLevel.level
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "replenish-agent")
        if !notDumpable { logger.warning("the process stays dumpable: prctl(PR_SET_DUMPABLE, 0) failed") }
        do {
            if let alexa = config.alexa {
                try await AlexaAgent(config: config, settings: alexa, logger: logger).run()
            } else {
                try await Agent(config: config, logger: logger).run()
            }
        } catch let error as AgentError {
            Output.error("replenish-agent: \(error.message)")
            throw ExitCode(error.code == .configuration ? Self.configurationExitCode : 1)
        }
    }
}
