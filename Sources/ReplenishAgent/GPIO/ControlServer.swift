import FoundationEssentials

/// The simulated board's control socket: `replenish-agent press` (and tests) press and hold named inputs of
/// the running agent through it. Requests are JSON over HTTP on a Unix socket in the state directory.
struct ControlServer: Sendable {
    let backend: SimulatedBackend
    let inputs: InputPipeline<ContinuousClock>
    let board: BoardFile

    struct PressRequest: Decodable {
        var input: String
        var holdSeconds: Double?
    }

    struct Answer: Encodable {
        var ok: Bool
        var message: String
    }

    func handle(_ request: ServerRequest) async -> ServerResponse {
        guard request.method == .POST, request.path == "/press" else {
            return .json(404, Answer(ok: false, message: "no such control command"))
        }
        guard let press = try? JSONDecoder().decode(PressRequest.self, from: Data(request.body)) else {
            return .json(400, Answer(ok: false, message: "the body must be {\"input\":NAME,\"holdSeconds\":N}"))
        }
        guard let input = board.input(named: press.input) else {
            return .json(400, Answer(ok: false, message: "the board has no input named \"\(press.input)\""))
        }
        let hold = press.holdSeconds ?? 0.15
        guard hold >= 0, hold <= 120 else { return .json(400, Answer(ok: false, message: "holdSeconds must be 0 to 120")) }
        // Wait for this press's outcome: debounce on both edges plus the hold, with room for a slow disk.
        let timeout = Duration.milliseconds(Int64(hold * 1000) + Int64(2 * input.debounceMilliseconds) + 10_000)
        let id = await inputs.expectPress(on: input.name)
        do {
            try backend.inject(input: input.name, active: true)
            try await Task.sleep(for: .milliseconds(Int64(hold * 1000)))
            try backend.inject(input: input.name, active: false)
        } catch {
            return .json(500, Answer(ok: false, message: "\(error)"))
        }
        switch await inputs.outcome(of: id, timeout: timeout) {
        case .success(let message): return .json(200, Answer(ok: true, message: message))
        case .failure(let error): return .json(409, Answer(ok: false, message: error.message))
        }
    }
}
