import ArgumentParser
import FoundationEssentials
import Logging

/// The owner commands' way to the running daemon: its control socket. The daemon holds the state in memory, so
/// while it runs only it may change the state files; the commands ask it first and do the work themselves
/// (under the state directory's lock) only when no daemon answers.
enum DaemonClient {
    struct Answer: Decodable {
        var ok: Bool
        var message: String
        /// true: the agent is stopping and does not know the request's outcome yet (a press whose write may still
        /// be under way): `press` waits for it to end and reads the outbox.
        var stopping: Bool?
    }

    /// The daemon's answer to a POST of `body` to `path`, or nil when no daemon runs (nothing answered and no
    /// process holds the state directory's lock: `StateDirectory.runningAgent`). When an agent runs but its answer did not
    /// come (it closed the connection, or did not take it), that is the failure, said as it happened: the
    /// command must not report "not running", nor fall back to doing the work itself beside the daemon. The time
    /// allowed covers a token refresh and a DRS call, each with its own 30 s limit.
    static func ask(
        _ path: String, body: [UInt8] = [], config: AgentConfig, timeoutSeconds: Int = 120
    ) -> Result<Answer, AgentError>? {
        let socket = Agent.controlSocketPath(stateDirectory: config.stateDirectory)
        let response: HTTPResponse
        do {
            response = try CurlEasy(options: .init(unixSocketPath: socket)).perform(
                HTTPRequest(
                    method: .post, url: "http://localhost" + path, headers: [("Content-Type", "application/json")],
                    body: body, timeoutSeconds: timeoutSeconds))
        } catch {
            guard let pid = StateDirectory.runningAgent(config.stateDirectory) else { return nil }
            return .failure(AgentError(.server, unanswered(error, pid: pid, socket: socket, timeout: timeoutSeconds)))
        }
        guard let answer = try? JSONDecoder().decode(Answer.self, from: Data(response.body)) else {
            return .failure(AgentError(.server, "unreadable answer from the agent (status \(response.status))"))
        }
        return .success(answer)
    }

    /// `ask` for an owner command that does the work itself when no agent runs (`deregister`, `reset`,
    /// `cancel-test-orders`): when the agent took the request but ended (killed, or stopped) before it answered,
    /// the request is asked again once it is gone: of the agent that runs by then, or, nil, of no one (the command
    /// then does the work, finishing what the agent began: a reset's wipe is resumable, `ResetWipe`). An agent that
    /// still runs after `waitSeconds` (busy, not ending) is reported as it was.
    static func askAfterItsEnd(
        _ path: String, body: [UInt8] = [], config: AgentConfig, waitSeconds: Double = 12
    ) async -> Result<Answer, AgentError>? {
        let answer = ask(path, body: body, config: config)
        guard case .failure = answer, await waitForEnd(stateDirectory: config.stateDirectory, seconds: waitSeconds)
        else {
            return answer
        }
        return ask(path, body: body, config: config)
    }

    /// Waits (polling every 50 ms, at most `seconds`) until the agent that holds the state directory's lock now
    /// no longer does: true when it ended (none runs, or another does by then), false when it still runs.
    static func waitForEnd(stateDirectory: String, seconds: Double) async -> Bool {
        guard let pid = StateDirectory.runningAgent(stateDirectory) else { return true }
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while StateDirectory.runningAgent(stateDirectory) == pid {
            guard ContinuousClock.now < deadline else { return false }
            try? await ContinuousClock().loopSleep(for: .milliseconds(50))
        }
        return true
    }

    /// What happened to a request a running agent (`pid`) did not answer, from libcurl's code.
    static func unanswered(_ error: AgentError, pid: Int32, socket: String, timeout: Int) -> String {
        let what =
            switch error.curl?.code {
            case CurlError.couldNotConnect?:
                "did not take the connection on \(socket) (it is starting, stopping or busy)"
            case CurlError.gotNothing?: "closed the connection on \(socket) without an answer (busy)"
            case CurlError.timedOut?: "did not answer within \(timeout) s (the request may still be done)"
            default: "did not answer on \(socket): \(error.message)"
            }
        return "the agent\(pid > 0 ? " (pid \(pid))" : "") is running but \(what); retry in a moment"
    }

    /// Prints the daemon's answer (standard output; after the command's name when `named`) or its reason
    /// (standard error, exit 1).
    static func report(_ command: String, _ result: Result<Answer, AgentError>, named: Bool = false) throws {
        switch result {
        case .success(let answer) where answer.ok: Output.line(named ? "\(command): \(answer.message)" : answer.message)
        case .success(let answer):
            Output.error("\(command): \(answer.message)")
            throw ExitCode(1)
        case .failure(let error):
            Output.error("\(command): \(error.message)")
            throw ExitCode(1)
        }
    }

    /// A logger for a command doing the daemon's work itself: warnings and worse on standard error, never a
    /// token (the agent logs none).
    static func commandLogger(_ command: String) -> Logger {
        Logger(label: "replenish-agent \(command)") { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .warning
            return handler
        }
    }
}
