import Synchronization

/// A board with no hardware: inputs are driven through the agent's control socket (`replenish-agent press`),
/// outputs are remembered so tests and `status` can see them.
final class SimulatedBackend: GPIOBackend {
    let edges: AsyncStream<InputEdge>
    private let continuation: AsyncStream<InputEdge>.Continuation
    private let board: BoardFile
    private let outputs = Mutex<[String: Bool]>([:])

    init(board: BoardFile) {
        self.board = board
        (edges, continuation) = AsyncStream.makeStream(of: InputEdge.self, bufferingPolicy: .bufferingNewest(1024))
    }

    /// Injects one raw edge, as the hardware would report it; `request`: the press request that made it.
    func inject(input: String, active: Bool, request: Int? = nil) throws(AgentError) {
        guard board.input(named: input) != nil else {
            throw AgentError(.invalidInput, "the board has no input named \"\(input)\"")
        }
        continuation.yield(InputEdge(input: input, active: active, request: request))
    }

    func setOutput(_ name: String, on: Bool) throws(AgentError) {
        guard board.outputs.contains(where: { $0.name == name }) else {
            throw AgentError(.hardware, "the board has no output named \"\(name)\"")
        }
        outputs.withLock { $0[name] = on }
    }

    func output(_ name: String) -> Bool? { outputs.withLock { $0[name] } }

    func shutdown() { continuation.finish() }

    /// A simulated board has no hardware to fail.
    var failure: AgentError? { nil }
}
