import Logging

/// Feeds a backend's raw edges through one `InputLine` per input, wakes at each debounce deadline (no polling: the
/// timer loop waits for a deadline only while a change is settling), and hands recognised presses to `handler`.
/// A press that a request made (`InputEdge.request`: the control socket's `press`) has its outcome given to
/// `requests` (the control socket's waiters) under that request's id, and to no other.
///
/// An edge is timed by the kernel's timestamp when it has one (`InputEdge.timestamp`, CLOCK_MONOTONIC): its
/// time on `clock` is now minus its age, so edges that reach the pipeline late (a busy device, a burst read
/// at once) still debounce and measure a press by when they happened. Only the age crosses clocks, so
/// `clock` need not be CLOCK_MONOTONIC (`ContinuousClock` on Linux is CLOCK_BOOTTIME).
final actor InputPipeline<C: Clock> where C.Duration == Duration {
    typealias Handler = @Sendable (ButtonPress) async -> PressWaiters.Outcome

    private let clock: C
    /// CLOCK_MONOTONIC now, the clock of the edges' timestamps (a test passes its manual clock's time).
    private let monotonicNow: @Sendable () -> Duration
    private let logger: Logger
    private let handler: Handler
    /// Told what became of a press a request made (the control socket's `PressWaiters`; none for `gpio-watch`).
    private let requests: (any PressRequests)?
    /// Each input's machine, and who made its press under way.
    private var lines: [String: InputLine<C.Instant>] = [:]
    /// Presses recognised and not yet handed to the handler, in order.
    private var ready: [RecognisedPress] = []
    /// Rung by an edge: the timer loop looks at the deadlines and the ready presses again.
    private let waker = Waker()

    init(
        board: BoardFile, clock: C, monotonicNow: @escaping @Sendable () -> Duration = { POSIX.monotonicNow() },
        logger: Logger, requests: (any PressRequests)? = nil, handler: @escaping Handler
    ) {
        self.clock = clock
        self.monotonicNow = monotonicNow
        self.logger = logger
        self.requests = requests
        self.handler = handler
        for input in board.inputs { lines[input.name] = InputLine(input) }
    }

    /// Consumes `edges`, with the timer loop beside it, until the edges end or the task is cancelled. Every press
    /// is handled in a child task of this group or of the timer loop's, so `run` returns only once each press
    /// recognised before the stop is carried out: its task is cancelled with the stop (a DRS call in it ends
    /// within a second, its write once the file is in place) and waited for.
    func run(edges: AsyncStream<InputEdge>) async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.runTimers() }
            for await edge in edges { receive(edge) }
            // A press the last edges completed goes to the handler even though the timer loop stops now.
            for press in takeDue().presses { group.addTask(operation: handling(press)) }
            group.cancelAll()
        }
    }

    /// The debounce timers, as one loop, each turn waiting for the next deadline or edge. Each press goes to the
    /// handler in a child task of the loop's own group: the edges and the timers never wait for a handler (which
    /// may be calling DRS), presses do not wait for each other, and the loop ends only once each has been handled.
    func runTimers() async {
        await withDiscardingTaskGroup { presses in
            while !Task.isCancelled {
                let (due, until) = takeDue()
                for press in due { presses.addTask(operation: handling(press)) }
                await waker.wait(for: LoopStep.wait(until: until, worked: !due.isEmpty), clock: clock)
            }
        }
    }

    /// One turn of the timer loop for a test on a manual clock (`StepDriver`): settles what is due and hands
    /// each press to the handler in turn, returning once it answered, so the test sees every outcome of a step
    /// when the step returns; returns the next deadline.
    func step() async -> LoopStep<C.Instant> {
        let (presses, until) = takeDue()
        for press in presses { await handling(press)() }
        return .wait(until: until, worked: !presses.isEmpty)
    }

    /// Settles every input whose debounce deadline has come; returns the presses ready (in order: an edge's,
    /// then the timers', input by input) and the next deadline.
    private func takeDue() -> (presses: [RecognisedPress], until: C.Instant?) {
        let now = clock.now
        for input in lines.keys.sorted() {
            if let press = lines[input]?.settle(at: now) { ready.append(press) }
        }
        defer { ready.removeAll() }
        return (ready, lines.values.compactMap(\.deadline).min())
    }

    /// The settled level of an input (for tests and diagnostics).
    func isActive(_ input: String) -> Bool? { lines[input]?.isActive }

    /// Takes one raw edge. A change that had settled before this edge happened, but whose timer had not fired
    /// yet because the edges came late, is settled first (`InputLine.edge`); a press it completes is ready for
    /// the timer loop, which hands it to the handler, so the edges never wait for a handler.
    func receive(_ edge: InputEdge) {
        guard var line = lines[edge.input] else {
            logger.warning("edge on an unknown input", metadata: ["gpio.input": "\(edge.input)"])
            return
        }
        let settled = line.edge(active: edge.active, request: edge.request, at: time(of: edge))
        lines[edge.input] = line
        if let settled { ready.append(settled) }
        waker.ring()
    }

    /// When the edge happened on `clock`: now minus its age (`InputEdge.age`).
    private func time(of edge: InputEdge) -> C.Instant {
        clock.now.advanced(by: .zero - edge.age(monotonicNow: monotonicNow()))
    }

    /// Says that `recognised` was recognised; returns its handling, the handler's call, which runs off the
    /// pipeline (the handler may take a DRS call or two). What became of a press a request made goes to
    /// `requests` under its id: from the recognition on, the request's wait is for the handler's outcome, no longer
    /// for a press.
    private func handling(_ recognised: RecognisedPress) -> @Sendable () async -> Void {
        let press = recognised.press
        logger.info(
            "press recognised", metadata: ["gpio.input": "\(press.input)", "gpio.press": "\(press.kind.rawValue)"])
        let (handler, requests, request) = (handler, requests, recognised.request)
        return {
            if let request { requests?.recognised(request) }
            let outcome = await handler(press)
            if let request { requests?.finish(request, with: outcome) }
        }
    }
}

extension InputPipeline {
    /// The inputs as the daemon runs them: the backend's edges through the pipeline. The edges end early only
    /// when the hardware failed: the part then stops the agent with the reason (systemd restarts it, and it
    /// requests the lines again) rather than run on deaf to the button.
    struct Part: DaemonPart {
        let inputs: InputPipeline
        let backend: any GPIOBackend
        var description: String { "inputs" }

        func work() async throws {
            await inputs.run(edges: backend.edges)
            guard Task.isCancelled else {
                throw backend.failure ?? AgentError(.hardware, "the GPIO input stream ended")
            }
        }
    }
}
