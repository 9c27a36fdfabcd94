/// One input as the pipeline keeps it: its machine (a debounced button, `ButtonDebouncer`, or a level sensor with
/// hysteresis, `LevelSensor`), the time of its latest edge (an input's edges are never taken to go back in time),
/// and who made the press under way: the request whose edge made the raw level what it is, and the one whose edge
/// started the press (the level that settled active). A press is answered to that request only
/// (`RecognisedPress.request`), never to another pressing the same input.
struct InputLine<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// The input's machine.
    enum Machine: Sendable {
        case button(ButtonDebouncer<Instant>)
        case level(LevelSensor<Instant>)
    }

    let name: String
    private(set) var machine: Machine
    private var latestEdgeAt: Instant?
    /// The raw level and the request whose edge made it so (nil: hardware, or no request).
    private var raw: (active: Bool, request: Int?)?
    /// The request whose edge started the press under way.
    private var pressRequest: Int?

    init(_ input: BoardFile.Input) {
        name = input.name
        switch input.kind {
        case .button:
            machine = .button(
                ButtonDebouncer(
                    debounce: .milliseconds(input.debounceMilliseconds),
                    longPress: .milliseconds(input.longPressMilliseconds)))
        case .level:
            machine = .level(
                LevelSensor(
                    minimumActive: .milliseconds(input.minimumActiveMilliseconds),
                    minimumInactive: .milliseconds(input.minimumInactiveMilliseconds)))
        }
    }

    var deadline: Instant? {
        switch machine {
        case .button(let button): button.deadline
        case .level(let sensor): sensor.deadline
        }
    }

    /// The settled level: a button held down, or a sensor that has counted the supply low.
    var isActive: Bool {
        switch machine {
        case .button(let button): button.isActive
        case .level(let sensor): sensor.state == .low || { if case .refilling = sensor.state { true } else { false } }()
        }
    }

    /// Takes an edge that happened at `time`. A change whose debounce period ended before the edge happened had
    /// settled by then: it is settled at the edge's time first, whether or not its timer has fired yet, and the
    /// press it completes is returned.
    mutating func edge(active: Bool, request: Int?, at time: Instant) -> RecognisedPress? {
        var at = time
        if let latest = latestEdgeAt, at < latest { at = latest }
        latestEdgeAt = at
        var settled: RecognisedPress?
        if let deadline, deadline <= at { settled = settle(at: at) }
        switch machine {
        case .button(var button):
            button.edge(active: active, at: at)
            machine = .button(button)
        case .level(var sensor):
            sensor.level(active: active, at: at)
            machine = .level(sensor)
        }
        // Only an edge that changes the level makes it: a second request pressing a button already down adds
        // nothing to that press, and is not its author.
        if raw?.active != active { raw = (active, request) }
        return settled
    }

    /// Ticks the machine at `now`: a level that settles active is a press started by the request whose edge made
    /// it so, and the press it completes is that request's.
    mutating func settle(at now: Instant) -> RecognisedPress? {
        let wasActive = isActive
        let kind: ButtonPress.Kind?
        switch machine {
        case .button(var button):
            let action = button.tick(at: now)
            machine = .button(button)
            switch action {
            case .shortPress?: kind = .short
            case .longPress?: kind = .long
            case nil: kind = nil
            }
        case .level(var sensor):
            let event = sensor.tick(at: now)
            machine = .level(sensor)
            kind = event.map { $0 == .low ? .low : .refilled }
        }
        if !wasActive, isActive { pressRequest = raw?.request }
        guard let kind else { return nil }
        defer { pressRequest = nil }
        return RecognisedPress(press: ButtonPress(input: name, kind: kind), request: pressRequest)
    }
}
