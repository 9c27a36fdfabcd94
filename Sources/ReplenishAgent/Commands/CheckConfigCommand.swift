import ArgumentParser

/// `check-config`: every problem of the config, the board file and the state directory, one a line.
struct CheckConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract:
            "Validate the config and board files, the state directory's owner and modes, and the config file's if it holds the client secret (exit 1 on any problem)."
    )

    @OptionGroup var options: ConfigOption

    @Flag(
        name: .long,
        help: """
            Before `run` (the unit's ExecCondition): problems of the files inside the state directory, which `run` \
            repairs or works around itself (a bad state file moved aside, a lax mode set to 600), are printed \
            as notes and do not make the exit status 1, so they never keep the agent from starting.
            """)
    var beforeRun = false

    func run() async throws {
        var problems = Problems()
        let config = AgentConfig.parse(path: options.config, problems: &problems)
        var lines = problems.lines
        var notes: [String] = []
        if let config {
            let found = Self.fileProblems(configPath: options.config, config: config)
            lines += found.blocking
            if beforeRun { notes = found.stateFiles } else { lines += found.stateFiles }
            // The runtime directory: an error by hand; before `run` (in the unit's sandbox), a note that `run`
            // logs too, since the agent orders without it.
            if let problem = RuntimeDirectoryCheck.problem(config.runtimeDirectory) {
                if beforeRun {
                    notes.append("runtimeDirectory: \(problem)")
                } else {
                    lines.append("runtimeDirectory: \(problem)")
                }
            }
        }
        for line in lines { Output.error(line) }
        for note in notes { Output.error("note: \(note) (run deals with it at start)") }
        guard lines.isEmpty else { throw ExitCode(1) }
        Output.line("config OK: \(options.config)")
        if let device = config?.device { Output.line("serial \(device.serial) from \(device.serialSource.describe)") }
        if let config, let note = RuntimeDirectoryCheck.note(config.runtimeDirectory) { Output.line("note: \(note)") }
        if let alexa = config?.alexa {
            Output.line(
                "program alexa: unit \(alexa.unitId) reports to \(alexa.cloudURL.text) with the certificate "
                    + "\(alexa.certificateFile) (its subject CN must be \(alexa.unitId))")
        }
        if let config, config.program == .drs, config.pairingMode == .companion {
            if config.pairingSetupKey == nil {
                Output.line("warning: \(AgentConfig.setupKeyMissingWarning)")
            } else {
                Output.line("pairing: setup key from pairing.setupKeyFile (proofs required)")
            }
            Output.line(
                "DNS-SD: "
                    + (AvahiAdvertisement.probe().map {
                        AdvertisementStatus.notAdvertised("avahi-daemon does not answer on the system bus (\($0))")
                    }
                        ?? "avahi-daemon answers: the pairing port is advertised as \(PairingAdvertisement.serviceType) while the window is open")
            )
        }
        // Not before `run` (the unit's ExecCondition=): a call to NetworkManager may wait seconds, and the agent
        // says the setup mode's availability itself (status).
        if let setup = config?.wifiSetup, !beforeRun {
            Output.line(
                "Wi-Fi setup: "
                    + (DBusNetworkManager.probe(
                        interface: setup.interface, accessPointInterface: setup.accessPointInterface
                    )
                    .map { "unavailable (\($0)); the agent runs without it" }
                        ?? "NetworkManager answers with a Wi-Fi device; the access point opens when the unit has no network")
            )
        }
        if config?.program == .drs { Output.line(TimeSyncSignal.inspect().description) }
        if let config, config.program == .drs, let (change, onlySerialFromAFile) = Self.identityChange(config) {
            Output.line(
                onlySerialFromAFile
                    ? "pairing: made for another serial (\(change)); run orders nothing while it re-reads the "
                        + "serial, and deregisters the pairing only if the serial still reads so after "
                        + "\(SerialSettling<ContinuousClock.Instant>.span.components.seconds / 60) minutes"
                    : "pairing: made for another identity (\(change)); run deregisters it and opens pairing at its "
                        + "start")
        }
    }

    /// What changed since the stored pairing was made (its serial, model or phase), and whether only a serial
    /// read from a file did (which `run` re-reads before it acts on it), or nil.
    static func identityChange(_ config: AgentConfig) -> (change: String, onlySerialFromAFile: Bool)? {
        let stored =
            (try? FileTokenStore.peek(stateDirectory: config.stateDirectory, on: DiskLane.Context.beforeServing()))
            ?? nil
        let now = DeviceIdentity(config.device)
        guard let stored, let change = stored.identityChange(to: now), let recorded = stored.identity else {
            return nil
        }
        return (change, config.device.serialSource != .config && now.differsOnlyInSerial(from: recorded))
    }

    /// The problems of the files around a valid config: `blocking`, the state directory itself (mode and owner,
    /// which stop `run`) and the config file when it holds `lwa.clientSecret`; `stateFiles`, the files inside the
    /// state directory (kind, owner, mode).
    static func fileProblems(configPath: String, config: AgentConfig) -> (blocking: [String], stateFiles: [String]) {
        var blocking: [String] = []
        var stateFiles: [String] = []
        let uid = StateDirectory.agentUID(config.stateDirectory)
        blocking += StateDirectory.socketPathProblems(config.stateDirectory)
        do {
            blocking += try StateDirectory.directoryProblems(config.stateDirectory, agentUID: uid)
            stateFiles += try StateDirectory.fileProblems(config.stateDirectory, agentUID: uid)
        } catch { blocking.append("stateDirectory: \(error.message)") }
        blocking += secretFileProblems(configPath, config: config, agentUID: uid)
        return (blocking, stateFiles)
    }

    /// A config that holds the client secret must not be readable by others, and must be owned by root or the
    /// agent's user (whoever owns it can change the secret and the URLs the agent trusts). The group may read it
    /// (root:replenish 0640 is the usual way).
    static func secretFileProblems(_ path: String, config: AgentConfig, agentUID: UserID) -> [String] {
        guard config.drs?.lwa.clientSecret != nil else { return [] }
        let info: FileInfo
        do {
            guard let found = try POSIX.status(path) else { return [] }
            info = found
        } catch { return ["\(path): \(error.message)"] }
        var lines: [String] = []
        if info.permissions & 0o004 != 0 {
            lines.append(
                "\(path): holds lwa.clientSecret and is readable by others (mode \(info.octalPermissions)); chmod o-rwx (for example 640, owner root, group of the agent)"
            )
        }
        if info.owner != 0 && info.owner != agentUID {
            lines.append(
                "\(path): holds lwa.clientSecret and is owned by uid \(info.owner); it must be owned by root or the agent's uid \(agentUID)"
            )
        }
        return lines
    }
}
