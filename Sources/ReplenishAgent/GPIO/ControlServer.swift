import FoundationEssentials
import Logging
import NIOCore
import Synchronization

/// The daemon's control socket (`control.sock` in the state directory, 0600: only the agent's user and root
/// reach it). On every board it takes owner commands (`reset`, `deregister`, `cancel-test-orders`: the daemon
/// does them, so no second process writes its state files); on the simulated board `replenish-agent press`
/// and `level` (and tests) also drive named inputs through it, with the same events real hardware gives:
/// bounce bursts, long holds, sensor levels. Requests are JSON over HTTP on the Unix socket.
///
/// Requests that take long (a held press, an owner command waiting on DRS) are capped apart (`Limits`), each
/// kind answering 503 "busy, retry" over its cap, well below the socket's connection cap: so a crowd of held
/// presses never keeps the owner's commands out, and a request over a cap gets that answer rather than a
/// connection closed unanswered.
struct ControlServer: Sendable {
    /// The simulated board, or nil on real hardware (press, level and state are then refused).
    let backend: SimulatedBackend?
    let inputs: InputPipeline<ContinuousClock>
    /// The `press` requests waiting for their press's outcome, which `inputs` gives them.
    let waiters: PressWaiters
    let lights: Lights<ContinuousClock>
    let board: BoardFile
    let owner: @Sendable (OwnerCommand) async -> Result<String, AgentError>
    let limits = Limits()
    private let pressesInFlight = InFlight()
    private let ownerCommandsInFlight = InFlight()

    /// How many requests of each slow kind are answered at once, and connections in all. The connection cap
    /// leaves room over the two slow caps for quick requests (state, level, refusals) and idle connections,
    /// which give way to new ones (`LocalHTTPServer`'s admission), so that the server's own refusal (a close
    /// without an answer, when every connection is being answered) is out of reach of requests that wait.
    struct Limits: Sendable {
        /// Simulated presses being held or waiting for their outcome.
        var pressesInFlight = 16
        /// Owner commands (reset, deregister, cancel-test-orders) being done.
        var ownerCommandsInFlight = 8
        /// Open connections to the socket (all from one peer: the socket is the agent's user's alone).
        var connections = 64
    }

    /// A count of requests of one kind being answered.
    private final class InFlight: Sendable {
        private let count = Mutex(0)

        /// Counts one more, unless `limit` are in flight already.
        func enter(limit: Int) -> Bool {
            count.withLock { count in
                guard count < limit else { return false }
                count += 1
                return true
            }
        }

        func leave() { count.withLock { $0 -= 1 } }

        var current: Int { count.withLock { $0 } }
    }

    /// What the owner's commands ask of the daemon.
    enum OwnerCommand: Sendable, Equatable {
        case reset
        case deregister
        case cancelTestOrders(slot: String?)
    }

    struct CancelTestOrdersRequest: Decodable {
        var slot: String?
    }

    struct PressRequest: Decodable {
        var input: String
        var holdSeconds: Double?
        /// Extra contact bounces at each edge (a worn switch); debouncing must still give one press.
        var bounces: Int?
    }

    struct LevelRequest: Decodable {
        var input: String
        var active: Bool
    }

    struct Answer: Encodable {
        var ok: Bool
        var message: String
        /// true: the agent is stopping and does not know the request's outcome (a press whose write may still be
        /// under way, `StopBound`); `press` then waits for the agent to end and reads the outbox.
        var stopping: Bool? = nil
    }

    struct State: Encodable {
        var outputs: [String: Bool]
        var ledPattern: String
        /// Each input's settled level (a button held down past its debounce, a sensor counted low).
        var inputs: [String: Bool]
        /// Simulated presses being held or waiting for their outcome (a test sees its held presses taken).
        var pressesInFlight: Int
    }

    func handle(_ request: ServerRequest) async -> ServerResponse {
        if request.method == .POST, let command = Self.ownerCommand(path: request.path, body: request.body) {
            switch command {
            case .success(let command):
                guard ownerCommandsInFlight.enter(limit: limits.ownerCommandsInFlight) else {
                    return Self.busy("\(limits.ownerCommandsInFlight) owner commands are being done")
                }
                defer { ownerCommandsInFlight.leave() }
                switch await owner(command) {
                case .success(let message): return .json(200, Answer(ok: true, message: message))
                case .failure(let error): return .json(500, Answer(ok: false, message: error.message))
                }
            case .failure(let error): return .json(400, Answer(ok: false, message: error.message))
            }
        }
        guard let backend else {
            return .json(
                404, Answer(ok: false, message: "the board is real hardware; this works on the simulated board only"))
        }
        switch (request.method, request.path) {
        case (.POST, "/press"):
            guard pressesInFlight.enter(limit: limits.pressesInFlight) else {
                return Self.busy("\(limits.pressesInFlight) presses are in progress")
            }
            defer { pressesInFlight.leave() }
            return await press(request.body, backend: backend)
        case (.POST, "/level"): return level(request.body, backend: backend)
        case (.GET, "/state"):
            var outputs: [String: Bool] = [:]
            for output in board.outputs { outputs[output.name] = backend.output(output.name) ?? false }
            var levels: [String: Bool] = [:]
            for input in board.inputs { levels[input.name] = await inputs.isActive(input.name) ?? false }
            return .json(
                200,
                State(
                    outputs: outputs, ledPattern: await lights.pattern.rawValue, inputs: levels,
                    pressesInFlight: pressesInFlight.current))
        default: return .json(404, Answer(ok: false, message: "no such control command"))
        }
    }

    /// The answer over a cap: 503, with what is going on.
    static func busy(_ what: String) -> ServerResponse {
        .json(503, Answer(ok: false, message: "the agent is busy: \(what); retry when one has finished"))
    }

    /// The owner command a request names, nil for another path.
    static func ownerCommand(path: String, body: [UInt8]) -> Result<OwnerCommand, AgentError>? {
        switch path {
        case "/reset": return .success(.reset)
        case "/deregister": return .success(.deregister)
        case "/cancel-test-orders":
            guard let request = try? JSONDecoder().decode(CancelTestOrdersRequest.self, from: Data(body)) else {
                return .failure(AgentError(.invalidInput, "the body must be {\"slot\":ID} or {}"))
            }
            return .success(.cancelTestOrders(slot: request.slot))
        default: return nil
        }
    }

    private func press(_ body: [UInt8], backend: SimulatedBackend) async -> ServerResponse {
        guard let press = try? JSONDecoder().decode(PressRequest.self, from: Data(body)) else {
            return .json(
                400, Answer(ok: false, message: "the body must be {\"input\":NAME,\"holdSeconds\":N,\"bounces\":N}"))
        }
        guard let input = board.input(named: press.input) else {
            return .json(400, Answer(ok: false, message: "the board has no input named \"\(press.input)\""))
        }
        guard input.kind == .button else {
            return .json(400, Answer(ok: false, message: "\(input.name) is a level sensor; use `level`"))
        }
        let hold = press.holdSeconds ?? 0.15
        let bounces = press.bounces ?? 0
        guard hold >= 0, hold <= 120 else {
            return .json(400, Answer(ok: false, message: "holdSeconds must be 0 to 120"))
        }
        guard (0...100).contains(bounces) else {
            return .json(400, Answer(ok: false, message: "bounces must be 0 to 100"))
        }
        let timeout = PressWait<ContinuousClock.Instant>.timeout(
            hold: .milliseconds(Int64(hold * 1000)), debounce: .milliseconds(input.debounceMilliseconds))
        let id = waiters.add()
        let ended = await pressAndRelease(input.name, holding: hold, bounces: bounces, request: id, backend: backend)
        if let ended {
            // The request ends without waiting for its press (cut short, or the injection failed): its waiter
            // goes with it, so that no later press's answer is kept for a client that is gone.
            waiters.forget(id)
            return ended
        }
        switch await waiters.outcome(of: id, timeout: timeout, clock: ContinuousClock()) {
        case .success(let message): return .json(200, Answer(ok: true, message: message))
        // The agent is stopping: the press's write may still be under way (`StopBound`), so its outcome is not
        // known here; `press` waits for the agent to end and reads the outbox.
        case .failure(let error) where Task.isCancelled:
            return .json(503, Answer(ok: false, message: error.message, stopping: true))
        case .failure(let error): return .json(409, Answer(ok: false, message: error.message))
        }
    }

    /// Presses `input` for `hold` seconds and releases it, each edge marked as `request`'s; nil when the hold was
    /// carried out, else the answer the request ends with. A request cancelled while holding (its client went
    /// away, or the agent is stopping) releases the button at once.
    private func pressAndRelease(
        _ input: String, holding hold: Double, bounces: Int, request: Int, backend: SimulatedBackend
    ) async -> ServerResponse? {
        do throws(AgentError) {
            try edges(input, settlingAt: true, bounces: bounces, request: request, backend: backend)
            // The button is released in any case: a hold cut short (the agent stopping) must not leave it down.
            let held: Result<Void, any Error> = await Result {
                try await ContinuousClock().loopSleep(for: .milliseconds(Int64(hold * 1000)))
            }
            try edges(input, settlingAt: false, bounces: bounces, request: request, backend: backend)
            if case .failure = held {
                return .json(
                    503,
                    Answer(
                        ok: false, message: "the agent is stopping: the simulated press was cut short", stopping: true))
            }
            return nil
        } catch {
            return .json(500, Answer(ok: false, message: "\(error)"))
        }
    }

    /// A burst of `bounces` back-and-forth edges, ending at `level`, made by `request`.
    private func edges(
        _ input: String, settlingAt level: Bool, bounces: Int, request: Int, backend: SimulatedBackend
    ) throws(AgentError) {
        for _ in 0..<bounces {
            try backend.inject(input: input, active: level, request: request)
            try backend.inject(input: input, active: !level, request: request)
        }
        try backend.inject(input: input, active: level, request: request)
    }

    private func level(_ body: [UInt8], backend: SimulatedBackend) -> ServerResponse {
        guard let request = try? JSONDecoder().decode(LevelRequest.self, from: Data(body)) else {
            return .json(400, Answer(ok: false, message: "the body must be {\"input\":NAME,\"active\":BOOL}"))
        }
        guard let input = board.input(named: request.input), input.kind == .level else {
            return .json(400, Answer(ok: false, message: "the board has no level input named \"\(request.input)\""))
        }
        do { try backend.inject(input: input.name, active: request.active) } catch {
            return .json(500, Answer(ok: false, message: error.message))
        }
        return .json(
            200,
            Answer(ok: true, message: "\(input.name) is now \(request.active ? "low (active)" : "full (inactive)")"))
    }
}

extension ControlServer {
    /// Serves the control socket (mode 0600) at `path` until cancelled.
    func serve(at path: String, group: any EventLoopGroup, disk: DiskLane, logger: Logger) async throws {
        var serverLimits = LocalHTTPServer.Limits()
        serverLimits.maximumConnections = limits.connections
        serverLimits.maximumConnectionsPerPeer = limits.connections
        try await LocalHTTPServer.serve(
            at: .unix(path: path), group: group, limits: serverLimits,
            onBound: { _ in
                // The umask already made it 0600; a failure here is worth a line, not a stop. On the disk lane:
                // the state directory is on the flash, and the loop serves by now (`OffLoop`).
                do { try await disk.run { _ throws(AgentError) in try POSIX.setMode(path, 0o600) } } catch {
                    logger.warning("control socket mode", metadata: ["error": "\(error)"])
                }
                logger.info("control socket ready", metadata: ["control.socket": "\(path)"])
            }, handler: { request in await handle(request) })
    }
}

extension ControlServer {
    /// The control socket as the daemon runs it.
    struct Part: DaemonPart {
        let control: ControlServer
        let path: String
        let group: any EventLoopGroup
        /// The daemon's disk lane, where the socket's mode is set.
        let disk: DiskLane
        let logger: Logger
        var description: String { "control" }

        func work() async throws { try await control.serve(at: path, group: group, disk: disk, logger: logger) }
    }
}
