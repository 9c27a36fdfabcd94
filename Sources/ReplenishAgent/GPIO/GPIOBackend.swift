/// A change of an input line's logical level (active = pressed, or level below threshold), as the backend
/// saw it: raw, bounces included. Debouncing is `InputLine`'s job.
struct InputEdge: Sendable {
    var input: String
    var active: Bool
    /// When the kernel saw the edge, as time on CLOCK_MONOTONIC (libgpiod's event timestamp; see
    /// `POSIX.monotonicNow`); nil when the backend has none (the simulated board, a level read at start).
    /// `InputPipeline` times the edge by it rather than by when the edge reached the pipeline.
    var timestamp: Duration?
    /// The control socket's press request that made the edge (the simulated board's `press`; nil for hardware
    /// and `level`): the press it starts is answered to that request (`PressWaiters.add`) and no other.
    var request: Int?

    init(input: String, active: Bool, timestamp: Duration? = nil, request: Int? = nil) {
        self.input = input
        self.active = active
        self.timestamp = timestamp
        self.request = request
    }

    /// How long before `monotonicNow` (CLOCK_MONOTONIC now) the kernel saw the edge: zero when the edge has no
    /// timestamp, or one later than now (a kernel before Linux 5.7 stamps libgpiod v1 events with
    /// CLOCK_REALTIME, which is decades ahead of the time since boot).
    func age(monotonicNow: Duration) -> Duration {
        guard let timestamp, timestamp <= monotonicNow else { return .zero }
        return monotonicNow - timestamp
    }
}

/// The device's GPIO: input edges in, LED levels out. `GpiodBackend` drives a real chip through libgpiod;
/// `SimulatedBackend` is the same face with no hardware (desktop, tests, the demo).
protocol GPIOBackend: Sendable {
    /// The stream of raw edges of every input. One consumer.
    var edges: AsyncStream<InputEdge> { get }
    /// Drives an output (LED) on or off.
    func setOutput(_ name: String, on: Bool) throws(AgentError)
    /// Releases the lines and ends `edges`.
    func shutdown()
    /// Why `edges` ended on its own (the hardware failed), or nil while it runs or after `shutdown`.
    var failure: AgentError? { get }
}
