import ArgumentParser

#if canImport(Glibc)
    import Glibc
#endif

/// `check-config`: every problem of the config, the board file and the state directory, one a line.
struct CheckConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract:
            "Validate the config and board files, the state directory's owner and modes, and the config file's if it holds the client secret (exit 1 on any problem)."
    )

    @OptionGroup var options: ConfigOption

    func run() async throws {
        var problems = Problems()
        let config = AgentConfig.parse(path: options.config, problems: &problems)
        var lines = problems.lines
        if let config {
            lines += Self.fileProblems(configPath: options.config, config: config)
        }
        for line in lines { Output.error(line) }
        guard lines.isEmpty else { throw ExitCode(1) }
        Output.line("config OK: \(options.config)")
    }

    /// The problems of the files around a valid config: the state directory and its files (owners and modes),
    /// and the config file itself when it holds `lwa.clientSecret`.
    static func fileProblems(configPath: String, config: AgentConfig) -> [String] {
        var lines: [String] = []
        do { lines += try StateDirectory.problems(config.stateDirectory) } catch {
            lines.append("stateDirectory: \(error.message)")
        }
        lines += secretFileProblems(
            configPath, config: config, agentUID: StateDirectory.agentUID(config.stateDirectory))
        return lines
    }

    /// A config that holds the client secret must not be readable by others, and must be owned by root or the
    /// agent's user (whoever owns it can change the secret and the URLs the agent trusts). The group may read it
    /// (root:replenish 0640 is the usual way).
    static func secretFileProblems(_ path: String, config: AgentConfig, agentUID: uid_t) -> [String] {
        guard config.lwa.clientSecret != nil else { return [] }
        let info: stat
        do {
            guard let found = try POSIX.status(path) else { return [] }
            info = found
        } catch { return ["\(path): \(error.message)"] }
        var lines: [String] = []
        if info.st_mode & 0o004 != 0 {
            lines.append(
                "\(path): holds lwa.clientSecret and is readable by others (mode \(String(info.st_mode & 0o777, radix: 8))); chmod o-rwx (for example 640, owner root, group of the agent)"
            )
        }
        if info.st_uid != 0 && info.st_uid != agentUID {
            lines.append(
                "\(path): holds lwa.clientSecret and is owned by uid \(info.st_uid); it must be owned by root or the agent's uid \(agentUID)"
            )
        }
        return lines
    }
}
