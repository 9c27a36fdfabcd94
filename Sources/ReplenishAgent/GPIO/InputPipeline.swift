import Logging

/// A press that the debouncer recognised on a named input.
struct ButtonPress: Sendable, Equatable {
    enum Kind: String, Sendable { case short, long }
    var input: String
    var kind: Kind
}

/// Feeds a backend's raw edges through one `ButtonDebouncer` per input, wakes at each debounce deadline
/// (no polling: a timer exists only while a change is settling), and hands recognised presses to `handler`.
/// Whoever caused a press (the control socket's `press`) can wait for the handler's outcome.
actor InputPipeline<C: Clock> where C.Duration == Duration {
    typealias Outcome = Result<String, AgentError>

    private let clock: C
    private let logger: Logger
    private let handler: @Sendable (ButtonPress) async -> Outcome
    private var debouncers: [String: ButtonDebouncer<C.Instant>] = [:]
    private var timers: [String: Task<Void, Never>] = [:]
    private var waiters: [Waiter] = []
    private var nextWaiterID = 0

    init(board: BoardFile, clock: C, logger: Logger, handler: @escaping @Sendable (ButtonPress) async -> Outcome) {
        self.clock = clock
        self.logger = logger
        self.handler = handler
        for input in board.inputs {
            debouncers[input.name] = ButtonDebouncer(
                debounce: .milliseconds(input.debounceMilliseconds), longPress: .milliseconds(input.longPressMilliseconds))
        }
    }

    /// Consumes `edges` until it ends or the task is cancelled.
    func run(edges: AsyncStream<InputEdge>) async {
        for await edge in edges {
            receive(edge)
        }
        for timer in timers.values { timer.cancel() }
    }

    func receive(_ edge: InputEdge) {
        guard var debouncer = debouncers[edge.input] else {
            logger.warning("edge on an unknown input", metadata: ["gpio.input": "\(edge.input)"])
            return
        }
        debouncer.edge(active: edge.active, at: clock.now)
        debouncers[edge.input] = debouncer
        arm(edge.input)
    }

    /// (Re)starts the input's timer for its debounce deadline, or drops it when nothing is settling.
    private func arm(_ input: String) {
        timers[input]?.cancel()
        timers[input] = nil
        guard let deadline = debouncers[input]?.deadline else { return }
        let clock = clock
        timers[input] = Task {
            do { try await clock.sleep(until: deadline, tolerance: nil) } catch { return }
            await self.fire(input)
        }
    }

    private func fire(_ input: String) async {
        guard var debouncer = debouncers[input] else { return }
        let action = debouncer.tick(at: clock.now)
        debouncers[input] = debouncer
        timers[input] = nil
        arm(input)
        guard let action else { return }
        let press: ButtonPress
        switch action {
        case .shortPress: press = ButtonPress(input: input, kind: .short)
        case .longPress: press = ButtonPress(input: input, kind: .long)
        }
        logger.info("press recognised", metadata: ["gpio.input": "\(input)", "gpio.press": "\(press.kind.rawValue)"])
        let outcome = await handler(press)
        resolveOldestWaiter(input, with: outcome)
    }

    /// Registers interest in the outcome of the next press recognised on `input` (before causing it), so
    /// the outcome cannot be missed; collect it with `outcome(of:timeout:)`.
    func expectPress(on input: String) -> Int {
        nextWaiterID += 1
        waiters.append(Waiter(id: nextWaiterID, input: input))
        return nextWaiterID
    }

    /// The outcome of the press registered as `id`, or a failure when none was recognised within `timeout`.
    func outcome(of id: Int, timeout: Duration) async -> Outcome {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else {
            return .failure(AgentError(.invalidInput, "unknown press"))
        }
        if let result = waiters[index].result {
            waiters.remove(at: index)
            return result
        }
        let clock = clock
        let timer = Task {
            try? await clock.sleep(for: timeout)
            self.finish(id, with: .failure(AgentError(.invalidInput, "no press was recognised within \(timeout)")))
        }
        let outcome = await withCheckedContinuation { continuation in
            waiters[index].continuation = continuation
        }
        timer.cancel()
        return outcome
    }

    private func resolveOldestWaiter(_ input: String, with outcome: Outcome) {
        guard let waiter = waiters.first(where: { $0.input == input && $0.result == nil }) else { return }
        finish(waiter.id, with: outcome)
    }

    private func finish(_ id: Int, with outcome: Outcome) {
        guard let index = waiters.firstIndex(where: { $0.id == id }), waiters[index].result == nil else { return }
        if let continuation = waiters[index].continuation {
            waiters.remove(at: index)
            continuation.resume(returning: outcome)
        } else {
            waiters[index].result = outcome
        }
    }

    private struct Waiter {
        let id: Int
        let input: String
        var result: Outcome?
        var continuation: CheckedContinuation<Outcome, Never>?
    }
}
