import Logging

/// Feeds a backend's raw edges through one `ButtonDebouncer` per input, wakes at each debounce deadline
/// (no polling: the timer loop waits for a deadline only while a change is settling), and hands recognised
/// presses to `handler`.
/// Whoever caused a press (the control socket's `press`) can wait for the handler's outcome: a press is
/// answered to the request whose edge started it (`InputEdge.request`), never to another request waiting on
/// the same input, and a request that goes away drops its wait (`forget`); the waits are `PressWaiters`.
///
/// An edge is timed by the kernel's timestamp when it has one (`InputEdge.timestamp`, CLOCK_MONOTONIC): its
/// time on `clock` is now minus its age, so edges that reach the pipeline late (a busy device, a burst read
/// at once) still debounce and measure a press by when they happened. Only the age crosses clocks, so
/// `clock` need not be CLOCK_MONOTONIC (`ContinuousClock` on Linux is CLOCK_BOOTTIME).
actor InputPipeline<C: Clock> where C.Duration == Duration {
    typealias Outcome = Result<String, AgentError>

    private let clock: C
    /// CLOCK_MONOTONIC now, the clock of the edges' timestamps (a test passes its manual clock's time).
    private let monotonicNow: @Sendable () -> Duration
    private let logger: Logger
    private let handler: @Sendable (ButtonPress) async -> Outcome
    private let handing: Handing
    private var machines: [String: InputMachine<C.Instant>] = [:]
    /// The time of each input's latest edge: an input's edges are never taken to go back in time.
    private var latestEdgeAt: [String: C.Instant] = [:]
    /// Presses recognised and not yet handed to the handler, in order.
    private var ready: [Recognised] = []
    /// Each input's raw level and the request whose edge made it so (nil: hardware, or no request).
    private var rawLevels: [String: (active: Bool, request: Int?)] = [:]
    /// The request whose edge started each input's press under way (the level that settled active).
    private var pressRequests: [String: Int] = [:]
    /// Rung by an edge: the timer loop looks at the deadlines and the ready presses again.
    private let waker = Waker()
    /// The control socket's requests waiting for their presses' outcomes.
    private let waiters = PressWaiters()
    /// The presses being handled (`Handing.detached`): the stop waits for them (`run`).
    private var handling: [Int: Task<Void, Never>] = [:]
    private var nextHandlingID = 0

    /// How the timer loop hands a recognised press to the handler.
    enum Handing: Sendable {
        /// Each in a task of its own: the edges and the timers never wait for a handler, which may be calling
        /// DRS (the agent, `gpio-watch`).
        case detached
        /// In turn, the step returning once the handler answered: a test on a manual clock sees every outcome
        /// of a step when the step returns (`StepDriver`).
        case awaited
    }

    init(
        board: BoardFile, clock: C, monotonicNow: @escaping @Sendable () -> Duration = { POSIX.monotonicNow() },
        handing: Handing = .detached, logger: Logger, handler: @escaping @Sendable (ButtonPress) async -> Outcome
    ) {
        self.clock = clock
        self.handing = handing
        self.monotonicNow = monotonicNow
        self.logger = logger
        self.handler = handler
        for input in board.inputs { machines[input.name] = InputMachine(input) }
    }

    /// Consumes `edges`, with the timer loop beside it, until the edges end or the task is cancelled.
    func run(edges: AsyncStream<InputEdge>) async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.runTimers() }
            for await edge in edges { receive(edge) }
            // A press the last edges completed goes to the handler even though the timer loop stops now.
            for press in takeDue().presses { await hand(press) }
            group.cancelAll()
        }
        // A press recognised before the stop is carried out before the agent exits: its task is cancelled (a DRS
        // call in it ends within a second, its write once the file is in place) and waited for.
        for task in handling.values { task.cancel() }
        while let (id, task) = handling.first {
            await task.value
            handling[id] = nil
        }
    }

    /// The debounce timers, as one loop of `step`s, each waiting for the next deadline or edge.
    func runTimers() async {
        while !Task.isCancelled { await waker.wait(for: await step(), clock: clock) }
    }

    /// What the timer loop does once: settles what is due, hands each press to the handler (`handing`), and
    /// returns the next deadline.
    func step() async -> LoopStep<C.Instant> {
        let (presses, until) = takeDue()
        for press in presses { await hand(press) }
        return .wait(until: until, worked: !presses.isEmpty)
    }

    private func hand(_ press: Recognised) async {
        switch handing {
        case .detached:
            let id = nextHandlingID
            nextHandlingID += 1
            handling[id] = Task {
                await self.deliver(press)
                self.handled(id)
            }
        case .awaited: await deliver(press)
        }
    }

    private func handled(_ id: Int) {
        handling[id] = nil
    }

    /// Settles every input whose debounce deadline has come; returns the presses ready (in order: an edge's,
    /// then the timers', input by input) and the next deadline.
    private func takeDue() -> (presses: [Recognised], until: C.Instant?) {
        let now = clock.now
        for input in machines.keys.sorted() {
            guard var machine = machines[input] else { continue }
            // A tick moves the deadline on or ends it; the bound only guards against a machine that would not.
            for _ in 0..<8 {
                guard let deadline = machine.deadline, deadline <= now else { break }
                if let press = settle(input, &machine, at: now) { ready.append(press) }
            }
            machines[input] = machine
        }
        defer { ready.removeAll() }
        return (ready, machines.values.compactMap(\.deadline).min())
    }

    /// The settled level of an input (for tests and diagnostics).
    func isActive(_ input: String) -> Bool? { machines[input]?.isActive }

    /// Takes one raw edge. A change that had settled before this edge happened, but whose timer had not fired
    /// yet because the edges came late, is settled first; a press it completes is ready for the timer loop,
    /// which hands it to the handler, so the edges never wait for a handler (which may be calling DRS).
    func receive(_ edge: InputEdge) {
        guard var machine = machines[edge.input] else {
            logger.warning("edge on an unknown input", metadata: ["gpio.input": "\(edge.input)"])
            return
        }
        var at = time(of: edge)
        if let latest = latestEdgeAt[edge.input], at < latest { at = latest }
        latestEdgeAt[edge.input] = at
        // A change whose debounce period ended before this edge happened had settled by then: settle it at this
        // edge's time first, whether or not its timer has fired yet.
        var settled: Recognised?
        if let deadline = machine.deadline, deadline <= at { settled = settle(edge.input, &machine, at: at) }
        machine.edge(active: edge.active, at: at)
        machines[edge.input] = machine
        // Only an edge that changes the level makes it: a second request pressing a button already down adds
        // nothing to that press, and is not its author.
        if rawLevels[edge.input]?.active != edge.active {
            rawLevels[edge.input] = (edge.active, edge.request)
        }
        if let settled { ready.append(settled) }
        waker.ring()
    }

    /// Ticks `input`'s machine at `now`: a level that settles active is a press started by the request whose
    /// edge made it so, and the press it completes is that request's.
    private func settle(_ input: String, _ machine: inout InputMachine<C.Instant>, at now: C.Instant) -> Recognised? {
        let wasActive = machine.isActive
        let kind = machine.tick(at: now)
        if !wasActive, machine.isActive { pressRequests[input] = rawLevels[input]?.request }
        guard let kind else { return nil }
        return Recognised(
            press: ButtonPress(input: input, kind: kind), request: pressRequests.removeValue(forKey: input))
    }

    /// When the edge happened on `clock`: now minus its age (`InputEdge.age`).
    private func time(of edge: InputEdge) -> C.Instant {
        clock.now.advanced(by: .zero - edge.age(monotonicNow: monotonicNow()))
    }

    /// Hands a recognised press to the handler and its outcome to the request that made it, if it still waits.
    private func deliver(_ recognised: Recognised) async {
        let press = recognised.press
        logger.info(
            "press recognised", metadata: ["gpio.input": "\(press.input)", "gpio.press": "\(press.kind.rawValue)"])
        // The waiter is the request's own, never the oldest on this input: a request that went away has dropped
        // its waiter, and its press is answered to no one rather than to the next request's wait. From now on the
        // wait is for the handler's outcome (which may take a DRS call or two), no longer for a press.
        if let id = recognised.request { waiters.recognised(id) }
        let outcome = await handler(press)
        if let id = recognised.request { waiters.finish(id, with: outcome) }
    }

    /// Registers a request that will press an input (before it does, so the outcome cannot be missed): its
    /// edges carry the id returned (`InputEdge.request`), and the press they start is its own. Collect the
    /// outcome with `outcome(of:timeout:)`, or `forget` the id when the request ends without it.
    func expectPress() -> Int { waiters.add() }

    /// Drops the waiter `id` (its request ended: the client went away, the agent stops). Its press, if one is
    /// recognised later, is handled all the same and answered to no one.
    func forget(_ id: Int) { waiters.forget(id) }

    /// The outcome of the press registered as `id`. A failure when no press was recognised within `timeout`;
    /// once one is, the handler's own outcome, however long its DRS calls take (up to `outcomeLimit`). Ends
    /// at once, with a failure, when the caller is cancelled (the agent stopping).
    func outcome(of id: Int, timeout: Duration) async -> Outcome {
        let (clock, waiters) = (clock, waiters)
        var wait = PressWait(startedAt: clock.now, timeout: timeout)
        let timer = Task {
            while true {
                switch wait.next(recognised: waiters.isRecognised(id), at: clock.now) {
                case .wait(let until):
                    do { try await clock.loopSleep(until: until) } catch { return }
                case .notRecognised:
                    let failure = AgentError(.invalidInput, "no press was recognised within \(timeout)")
                    return waiters.finish(id, with: .failure(failure))
                case .outcomeUnknown:
                    let failure = AgentError(
                        .server,
                        "the press was recognised; its outcome is not known yet (DRS is slow to answer): see replenish-agent status"
                    )
                    return waiters.finish(id, with: .failure(failure))
                }
            }
        }
        let outcome = await waiters.outcome(of: id)
        timer.cancel()
        return outcome ?? .failure(AgentError(.invalidInput, "unknown press"))
    }

    /// A recognised press and the request whose edge started it (nil: hardware, or no request).
    private struct Recognised {
        var press: ButtonPress
        var request: Int?
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
