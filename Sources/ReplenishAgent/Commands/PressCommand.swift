import ArgumentParser
import FoundationEssentials

/// `press BUTTON [--hold SECONDS]`: presses an input of the running agent on the simulated board.
struct PressCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "press",
        abstract: "Simulated board only: press (and release) a named input of the running agent.",
        discussion: "Exits 0 once the agent has accepted the press and written it durably.")

    /// The exit status of a press that is written and kept, to be ordered when the agent runs again: the agent
    /// stopped or died before it could confirm it (never reported as a failure: pressing again would order twice).
    static let keptExitCode: Int32 = 2

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
        try ControlClient.send(
            "press", path: "/press", body: Array(body), config: config,
            // The agent answers within the hold, 10 s for the press to be recognised and 100 s for its outcome.
            timeoutSeconds: Int(hold ?? 0) + 130,
            unanswered: { [input] in Self.writtenAnyway(input: input, config: config, since: sentAt) })
    }

    /// After a press the agent did not answer (it stopped or was killed while writing it, or after): whether the
    /// press is on disk all the same, read from the outbox: a press of the input's slot recorded at or after
    /// `since` (when the request left), still queued or already answered. nil when none is found or the file
    /// cannot be read (the failure is then said as it happened).
    static func writtenAnyway(input: String, config: AgentConfig, since: Double) -> String? {
        guard let slot = config.buttons.first(where: { $0.input == input })?.slot else { return nil }
        guard
            case .read(let outbox)? = try? StateStore<Outbox>.outbox(stateDirectory: config.stateDirectory).read(
                owner: StateDirectory.agentUID(config.stateDirectory))
        else { return nil }
        if outbox.entry(for: slot)?.pressedAt.contains(where: { $0 >= since }) == true {
            return "the agent stopped before it answered, but the press was written: it is kept and will be "
                + "ordered when the agent runs (replenish-agent status shows it)"
        }
        if outbox.orders?.contains(where: { $0.slot == slot && $0.answeredAt >= since }) == true {
            return "the agent stopped before it answered, but the press was written and ordered "
                + "(replenish-agent orders shows it)"
        }
        return nil
    }
}

/// The client side of the simulated board's control socket, for `press` and `level` (`DaemonClient.ask`).
enum ControlClient {
    /// Sends one command; prints the agent's answer, or its reason on standard error and exits 1. `unanswered`:
    /// what is true all the same when the agent did not answer (not running, stopping, gone mid-request), said
    /// with exit 0; nil when nothing is known.
    static func send(
        _ command: String, path: String, body: [UInt8], config: AgentConfig, timeoutSeconds: Int,
        unanswered: () -> String? = { nil }
    ) throws {
        guard config.board.backend == .simulated else {
            Output.error(
                "\(command): the board \(config.board.name) is real hardware; \(command) works on the simulated board only"
            )
            throw ExitCode(1)
        }
        guard
            let result = DaemonClient.ask(path, body: body, config: config, timeoutSeconds: timeoutSeconds)
        else {
            if let known = unanswered() {
                Output.line("\(command): \(known)")
                return
            }
            let socket = Agent.controlSocketPath(stateDirectory: config.stateDirectory)
            Output.error("\(command): the agent is not running with this config (nothing listens on \(socket))")
            throw ExitCode(1)
        }
        switch result {
        case .success(let answer) where answer.ok: break
        case .success, .failure:
            if let known = unanswered() {
                Output.line("\(command): \(known)")
                return
            }
        }
        try DaemonClient.report(command, result, named: true)
    }
}
