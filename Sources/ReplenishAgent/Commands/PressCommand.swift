import ArgumentParser
import FoundationEssentials

/// `press BUTTON [--hold SECONDS]`: presses an input of the running agent on the simulated board.
struct PressCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "press",
        abstract: "Simulated board only: press (and release) a named input of the running agent.",
        discussion: "Exits 0 once the agent has accepted the press and written it durably.")

    @OptionGroup var options: ConfigOption

    @Argument(help: "The input's name in the board file (for example: button).")
    var input: String

    @Option(name: .long, help: "How long to hold it, in seconds (a long press is 5 s by default).")
    var hold: Double?

    func validate() throws {
        if let hold, !(0...120).contains(hold) { throw ValidationError("--hold must be from 0 to 120 seconds") }
    }

    func run() async throws {
        let config = try options.load()
        guard config.board.backend == .simulated else {
            Output.error("press: the board \(config.board.name) is real hardware; press works on the simulated board only")
            throw ExitCode(1)
        }
        let socket = Agent.controlSocketPath(stateDirectory: config.stateDirectory)
        struct Body: Encodable { var input: String; var holdSeconds: Double? }
        let body = try JSONEncoder().encode(Body(input: input, holdSeconds: hold))
        let response: HTTPResponse
        do {
            let client = try CurlEasy(options: .init(unixSocketPath: socket))
            response = try client.perform(HTTPRequest(
                method: .post, url: "http://localhost/press", headers: [("Content-Type", "application/json")],
                body: Array(body), timeoutSeconds: Int(hold ?? 0) + 30))
        } catch {
            Output.error("press: the agent is not running with this config (no answer on \(socket)): \(error.message)")
            throw ExitCode(1)
        }
        struct Answer: Decodable { var ok: Bool; var message: String }
        guard let answer = try? JSONDecoder().decode(Answer.self, from: Data(response.body)) else {
            Output.error("press: unreadable answer from the agent (status \(response.status))")
            throw ExitCode(1)
        }
        guard answer.ok else {
            Output.error("press: \(answer.message)")
            throw ExitCode(1)
        }
        Output.line("press: \(answer.message)")
    }
}
