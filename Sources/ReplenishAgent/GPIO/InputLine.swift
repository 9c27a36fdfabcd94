/// One input as the pipeline keeps it: its raw level, its debounced state, and who made the press under way. Pure:
/// the caller passes times and calls `settle` at `deadline`.
///
/// A button is debounced here: an edge only counts once the line has kept its new level for the debounce period,
/// so any bounce burst ends as exactly one change, and a press's length (first stable active edge to last stable
/// release edge) decides short or long. A level sensor's hysteresis is `LevelSensor`'s. An input's edges are never
/// taken to go back in time. A press is answered only to the request whose edge started it (the level that settled
/// active; `RecognisedPress.request`), never to another pressing the same input.
struct InputLine<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// The input's kind, with what its debounce needs.
    enum Machine: Sendable {
        case button(debounce: Duration, longPress: Duration)
        case level(LevelSensor<Instant>)
    }

    let name: String
    private(set) var machine: Machine
    private var latestEdgeAt: Instant?
    /// The raw level, when it became so, and the request whose edge made it so (nil: hardware, or no request).
    private var raw: (active: Bool, at: Instant, request: Int?)?
    /// A button's debounced level: held down.
    private var down = false
    /// When the button's press under way started (the raw edge that settled active), and the request that made it.
    private var press: (at: Instant, request: Int?)?

    init(_ input: BoardFile.Input) {
        name = input.name
        switch input.kind {
        case .button:
            machine = .button(
                debounce: .milliseconds(input.debounceMilliseconds),
                longPress: .milliseconds(input.longPressMilliseconds))
        case .level:
            machine = .level(
                LevelSensor(
                    minimumActive: .milliseconds(input.minimumActiveMilliseconds),
                    minimumInactive: .milliseconds(input.minimumInactiveMilliseconds)))
        }
    }

    /// When `settle` must next be called: a button's raw level waiting out its debounce, or the sensor's deadline.
    var deadline: Instant? {
        switch machine {
        case .button(let debounce, _):
            guard let raw, raw.active != down else { return nil }
            return raw.at.advanced(by: debounce)
        case .level(let sensor): return sensor.deadline
        }
    }

    /// The settled level: a button held down, or a sensor that has counted the supply low.
    var isActive: Bool {
        switch machine {
        case .button: down
        case .level(let sensor): sensor.state == .low || { if case .refilling = sensor.state { true } else { false } }()
        }
    }

    /// Takes an edge (or a level report: repeats of the same level are harmless) that happened at `time`. A change
    /// whose debounce period ended before the edge happened had settled by then: it is settled at the edge's time
    /// first, whether or not its timer has fired yet, and the press it completes is returned.
    mutating func edge(active: Bool, request: Int?, at time: Instant) -> RecognisedPress? {
        var at = time
        if let latest = latestEdgeAt, at < latest { at = latest }
        latestEdgeAt = at
        let settled = settle(at: at)
        if case .level(var sensor) = machine {
            sensor.level(active: active, at: at)
            machine = .level(sensor)
        }
        // Only an edge that changes the level makes it: a second request pressing a button already down adds
        // nothing to that press, and is not its author.
        if raw?.active != active { raw = (active, at, request) }
        return settled
    }

    /// Settles a change whose deadline has come (`now` at or after it; before it, or with none, nothing changes): a
    /// button's raw level becomes its debounced one, a release completing a press; a sensor counts a low or a
    /// refill. Either ends the deadline. Returns the press completed, with the request whose edge started it.
    mutating func settle(at now: Instant) -> RecognisedPress? {
        switch machine {
        case .button(_, let longPress):
            guard let deadline, deadline <= now, let raw else { return nil }
            down = raw.active
            if down {
                press = (raw.at, raw.request)
                return nil
            }
            guard let started = press else { return nil }
            press = nil
            let kind: ButtonPress.Kind = started.at.duration(to: raw.at) >= longPress ? .long : .short
            return RecognisedPress(press: ButtonPress(input: name, kind: kind), request: started.request)
        case .level(var sensor):
            let event = sensor.tick(at: now)
            machine = .level(sensor)
            // A low is the press of the request whose edge made the level active; a refill is no one's.
            switch event {
            case .low?: return RecognisedPress(press: ButtonPress(input: name, kind: .low), request: raw?.request)
            case .refilled?: return RecognisedPress(press: ButtonPress(input: name, kind: .refilled), request: nil)
            case nil: return nil
            }
        }
    }
}
