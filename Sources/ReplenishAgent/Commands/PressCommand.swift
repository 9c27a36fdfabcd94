import ArgumentParser
import FoundationEssentials

/// `press BUTTON [--hold SECONDS]`: presses an input of the running agent on the simulated board.
struct PressCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "press",
        abstract: "Simulated board only: press (and release) a named input of the running agent.",
        discussion: """
            Exits 0 once the agent has accepted the press and written it durably. Exits 2 when the agent stopped \
            or died before it confirmed the press but the press is written: it is kept and will be ordered when \
            the agent runs again (do not press again). Exits 1 when the press was not taken, with the reason.
            """)

    /// The exit status of a press that is written and kept, to be ordered when the agent runs again: the agent
    /// stopped or died before it could confirm it (never reported as a failure: pressing again would order twice).
    static let keptExitCode: Int32 = 2

    /// How long `press` waits for a stopping agent to end before it reads the outbox: the agent's stop takes 10 s
    /// at most (`docs/behaviour.md`), and systemd ends it at 20 s.
    static let stopWaitSeconds = 25.0

    @OptionGroup var options: ConfigOption

    @Argument(help: "The input's name in the board file (for example: button).")
    var input: String

    @Option(name: .long, help: "How long to hold it, in seconds (a long press is 5 s by default).")
    var hold: Double?

    @Option(name: .long, help: "Contact bounces to add at each edge (debouncing must still give one press).")
    var bounce: Int?

    func validate() throws {
        if let hold, !(0...120).contains(hold) { throw ValidationError("--hold must be from 0 to 120 seconds") }
        if let bounce, !(0...100).contains(bounce) { throw ValidationError("--bounce must be from 0 to 100") }
    }

    func run() async throws {
        let config = try options.load()
        struct Body: Encodable {
            var input: String
            var holdSeconds: Double?
            var bounces: Int?
        }
        let body = try JSONEncoder().encode(Body(input: input, holdSeconds: hold, bounces: bounce))
        let sentAt = POSIX.wallTime()
        // The agent answers within the hold, 10 s for the press to be recognised and 100 s for its outcome.
        let result = try ControlClient.ask(
            "press", path: "/press", body: Array(body), config: config, timeoutSeconds: Int(hold ?? 0) + 130)
        if case .success(let answer)? = result, answer.ok {
            return Output.line("press: \(answer.message)")
        }
        // Not confirmed. Whether the press is written is read from the outbox, once no write of it can follow: the
        // agent has ended (it was stopping, or died mid-request), or it answered with its reason.
        var ended = true
        switch result {
        case .success(let answer)? where answer.stopping != true: ended = false
        case nil: break
        default:
            ended = await DaemonClient.waitForEnd(stateDirectory: config.stateDirectory, seconds: Self.stopWaitSeconds)
        }
        let found = Self.written(input: input, config: config, since: sentAt, agentEnded: ended)
        switch found {
        case .ordered(let text):
            Output.line("press: \(text)")
        case .kept(let text):
            Output.line("press: \(text)")
            throw ExitCode(Self.keptExitCode)
        case .unknown(let reason):
            Output.error(
                "press: not confirmed, and \(reason): whether the press was written is not known "
                    + "(replenish-agent status shows it)")
            throw ExitCode(1)
        case .absent:
            switch result {
            case .success(let answer)? where answer.stopping != true: Output.error("press: \(answer.message)")
            case .failure(let error)? where !ended: Output.error("press: \(error.message)")
            case .success? where !ended:
                Output.error(
                    "press: the agent is stopping but did not end within \(Int(Self.stopWaitSeconds)) s: whether the "
                        + "press is written is not known yet (replenish-agent status shows it)")
            case nil:
                let socket = Agent.controlSocketPath(stateDirectory: config.stateDirectory)
                Output.error("press: the agent is not running with this config (nothing listens on \(socket))")
            default:
                Output.error(
                    "press: not taken: the agent stopped before the press was written; press again once it runs")
            }
            throw ExitCode(1)
        }
    }

    /// What the outbox says of a press of `input` sent at `since`.
    enum Found {
        /// Written and already answered by DRS.
        case ordered(String)
        /// Written, still queued: ordered when the agent runs.
        case kept(String)
        /// Not in the outbox.
        case absent
        /// The outbox could not be read (the reason).
        case unknown(String)
    }

    /// Reads the outbox for a press of the input's slot recorded at or after `since` (when the request left),
    /// still queued or already answered. `agentEnded`: no agent can write the press any more (it ended, or it
    /// answered with its reason); a press found then is made durable here too, with the flush of the state
    /// directory that the agent may not have finished (the file's own data was flushed before its rename).
    static func written(input: String, config: AgentConfig, since: Double, agentEnded: Bool) -> Found {
        guard let slot = config.buttons.first(where: { $0.input == input })?.slot else { return .absent }
        let directory = config.stateDirectory
        let outbox: Outbox
        do {
            switch try StateStore<Outbox>.outbox(stateDirectory: directory).read(
                on: DiskLane.Context.beforeServing(), owner: StateDirectory.agentUID(directory))
            {
            case .missing: return .absent
            case .read(let read): outbox = read
            case .unusable(let reason): return .unknown("the outbox \(reason)")
            }
        } catch {
            return .unknown("the outbox cannot be read (\(error.message))")
        }
        if outbox.orders?.contains(where: { $0.slot == slot && $0.answeredAt >= since }) == true {
            return .ordered(
                "the press was written and ordered, though the agent did not confirm it "
                    + "(replenish-agent orders shows it)")
        }
        guard outbox.entry(for: slot)?.pressedAt.contains(where: { $0 >= since }) == true else { return .absent }
        // Best effort: the press is in the file whatever this flush says; only a power cut before the kernel
        // writes the directory back could undo its rename.
        if agentEnded { try? POSIX.syncDirectory(directory) }
        return .kept(
            "the press was written but not confirmed (the agent stopped or did not answer): it is kept and will be "
                + "ordered when the agent runs (replenish-agent status shows it); do not press again")
    }
}

/// The client side of the simulated board's control socket, for `press` and `level` (`DaemonClient.ask`).
enum ControlClient {
    /// Asks the agent (`DaemonClient.ask`: nil when no agent runs); exits 1 with the reason when the board is real
    /// hardware.
    static func ask(
        _ command: String, path: String, body: [UInt8], config: AgentConfig, timeoutSeconds: Int
    ) throws -> Result<DaemonClient.Answer, AgentError>? {
        guard config.board.backend == .simulated else {
            Output.error(
                "\(command): the board \(config.board.name) is real hardware; \(command) works on the simulated board only"
            )
            throw ExitCode(1)
        }
        return DaemonClient.ask(path, body: body, config: config, timeoutSeconds: timeoutSeconds)
    }

    /// Sends one command; prints the agent's answer, or its reason on standard error and exits 1.
    static func send(
        _ command: String, path: String, body: [UInt8], config: AgentConfig, timeoutSeconds: Int
    ) throws {
        guard let result = try ask(command, path: path, body: body, config: config, timeoutSeconds: timeoutSeconds)
        else {
            let socket = Agent.controlSocketPath(stateDirectory: config.stateDirectory)
            Output.error("\(command): the agent is not running with this config (nothing listens on \(socket))")
            throw ExitCode(1)
        }
        try DaemonClient.report(command, result, named: true)
    }
}
