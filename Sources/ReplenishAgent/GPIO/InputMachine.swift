/// One input's state machine: a debounced button or a level sensor with hysteresis.
enum InputMachine<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    case button(ButtonDebouncer<Instant>)
    case level(LevelSensor<Instant>)

    init(_ input: BoardFile.Input) {
        switch input.kind {
        case .button:
            self = .button(
                ButtonDebouncer(
                    debounce: .milliseconds(input.debounceMilliseconds),
                    longPress: .milliseconds(input.longPressMilliseconds)))
        case .level:
            self = .level(
                LevelSensor(
                    minimumActive: .milliseconds(input.minimumActiveMilliseconds),
                    minimumInactive: .milliseconds(input.minimumInactiveMilliseconds)))
        }
    }

    var deadline: Instant? {
        switch self {
        case .button(let machine): machine.deadline
        case .level(let machine): machine.deadline
        }
    }

    /// The settled level: a button held down, or a sensor that has counted the supply low.
    var isActive: Bool {
        switch self {
        case .button(let machine): machine.isActive
        case .level(let machine):
            machine.state == .low || { if case .refilling = machine.state { true } else { false } }()
        }
    }

    mutating func edge(active: Bool, at time: Instant) {
        switch self {
        case .button(var machine):
            machine.edge(active: active, at: time)
            self = .button(machine)
        case .level(var machine):
            machine.level(active: active, at: time)
            self = .level(machine)
        }
    }

    mutating func tick(at now: Instant) -> ButtonPress.Kind? {
        switch self {
        case .button(var machine):
            let action = machine.tick(at: now)
            self = .button(machine)
            switch action {
            case .shortPress?: return .short
            case .longPress?: return .long
            case nil: return nil
            }
        case .level(var machine):
            let event = machine.tick(at: now)
            self = .level(machine)
            switch event {
            case .low?: return .low
            case .refilled?: return .refilled
            case nil: return nil
            }
        }
    }
}
