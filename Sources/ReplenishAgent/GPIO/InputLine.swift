/// One input as the pipeline keeps it: its machine (`InputMachine`), the time of its latest edge (an input's edges
/// are never taken to go back in time), and who made the press under way: the request whose edge made the raw
/// level what it is, and the one whose edge started the press (the level that settled active). A press is
/// answered to that request only (`RecognisedPress.request`), never to another pressing the same input.
struct InputLine<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    let name: String
    private(set) var machine: InputMachine<Instant>
    private var latestEdgeAt: Instant?
    /// The raw level and the request whose edge made it so (nil: hardware, or no request).
    private var raw: (active: Bool, request: Int?)?
    /// The request whose edge started the press under way.
    private var pressRequest: Int?

    init(_ input: BoardFile.Input) {
        name = input.name
        machine = InputMachine(input)
    }

    var deadline: Instant? { machine.deadline }

    /// The settled level.
    var isActive: Bool { machine.isActive }

    /// Takes an edge that happened at `time`. A change whose debounce period ended before the edge happened had
    /// settled by then: it is settled at the edge's time first, whether or not its timer has fired yet, and the
    /// press it completes is returned.
    mutating func edge(active: Bool, request: Int?, at time: Instant) -> RecognisedPress? {
        var at = time
        if let latest = latestEdgeAt, at < latest { at = latest }
        latestEdgeAt = at
        var settled: RecognisedPress?
        if let deadline = machine.deadline, deadline <= at { settled = settle(at: at) }
        machine.edge(active: active, at: at)
        // Only an edge that changes the level makes it: a second request pressing a button already down adds
        // nothing to that press, and is not its author.
        if raw?.active != active { raw = (active, request) }
        return settled
    }

    /// Ticks the machine at `now`: a level that settles active is a press started by the request whose edge made
    /// it so, and the press it completes is that request's.
    mutating func settle(at now: Instant) -> RecognisedPress? {
        let wasActive = machine.isActive
        let kind = machine.tick(at: now)
        if !wasActive, machine.isActive { pressRequest = raw?.request }
        guard let kind else { return nil }
        defer { pressRequest = nil }
        return RecognisedPress(press: ButtonPress(input: name, kind: kind), request: pressRequest)
    }
}
