/// What the LED shows and until when, as a value (the shape of `DutyTimeline`): it takes the facts and the
/// transient signals with the current instant, and says the level to set and the next instant anything changes;
/// it reads no clock and sets no line. `Lights` carries it out.
///
/// The rules: the pattern is `LEDPattern.pattern(for:)` of the facts; a blinking pattern starts its cycle at
/// its first step when it is first shown and steps through it by the instants; a transient signal (an order
/// placed, an acknowledged press, a press for an order still open) shows for its time from its latest raise.
/// A steady pattern with no transient signal running waits for nothing (an idle LED makes no wakeups).
struct LightTimeline<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// The transient signals, each shown for its time.
    enum Signal: CaseIterable, Sendable {
        case orderPlaced, acknowledged, alreadyOrdered

        var duration: Duration {
            switch self {
            case .orderPlaced: .seconds(3)
            case .acknowledged: .milliseconds(600)
            case .alreadyOrdered: .seconds(2)
            }
        }

        var fact: WritableKeyPath<LEDPattern.Facts, Bool> & Sendable {
            switch self {
            case .orderPlaced: \.orderJustPlaced
            case .acknowledged: \.acknowledging
            case .alreadyOrdered: \.alreadyOrdered
            }
        }
    }

    /// The level to set now and when to look again (nil: not before a change).
    struct Output: Equatable, Sendable {
        var pattern: LEDPattern
        var on: Bool
        var until: Instant?
    }

    private(set) var facts = LEDPattern.Facts()
    private var signalEnds: [Signal: Instant] = [:]
    /// The pattern shown and when its current cycle began.
    private var shown: (pattern: LEDPattern, since: Instant)?

    init() {}

    mutating func update(_ change: (inout LEDPattern.Facts) -> Void) {
        change(&facts)
    }

    /// Shows `signal` from `now` for its time (a newer raise restarts the time).
    mutating func raise(_ signal: Signal, at now: Instant) {
        facts[keyPath: signal.fact] = true
        signalEnds[signal] = now.advanced(by: signal.duration)
    }

    /// The pattern shown at `now` (the signals whose time is over already gone).
    func pattern(at now: Instant) -> LEDPattern {
        var current = self
        current.endSignals(at: now)
        return LEDPattern.pattern(for: current.facts)
    }

    private mutating func endSignals(at now: Instant) {
        for (signal, end) in signalEnds where end <= now {
            facts[keyPath: signal.fact] = false
            signalEnds[signal] = nil
        }
    }

    mutating func next(at now: Instant) -> Output {
        endSignals(at: now)
        let pattern = LEDPattern.pattern(for: facts)
        if shown?.pattern != pattern { shown = (pattern, now) }
        let signalEnd = signalEnds.values.min()
        guard let steps = pattern.steps, let since = shown?.since else {
            return Output(pattern: pattern, on: pattern.steadyOn, until: signalEnd)
        }
        // Where in the cycle `now` is: the step it falls in, and when that step ends.
        let cycle = steps.reduce(0) { $0 + $1.milliseconds }
        let elapsed = since.duration(to: now)
        var offset = Int((elapsed / .milliseconds(1)).rounded(.down)) % cycle
        var stepEnd = now.advanced(by: .zero)
        var on = steps[0].on
        for step in steps {
            if offset < step.milliseconds {
                on = step.on
                stepEnd = now.advanced(by: .milliseconds(step.milliseconds - offset))
                break
            }
            offset -= step.milliseconds
        }
        return Output(pattern: pattern, on: on, until: signalEnd.map { min($0, stepEnd) } ?? stepEnd)
    }
}
