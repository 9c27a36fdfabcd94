import Logging

/// Drives the device's LED from what the daemon knows: every decision is `LightTimeline`'s (the pattern, its
/// blinking steps, the transient signals' times); this sets the line and wakes when the timeline says. A
/// steady pattern sets the line once and waits for a change: no wakeups.
final actor Lights<C: Clock> where C.Duration == Duration {
    private let backend: any GPIOBackend
    private let output: String?
    private let clock: C
    private let logger: Logger
    private let waker = Waker()
    private var timeline = LightTimeline<C.Instant>()
    private var shown: LEDPattern?
    /// The level last set (nil: not yet): the line is written only when it changes.
    private var level: Bool?

    init(backend: any GPIOBackend, output: String?, clock: C, logger: Logger) {
        self.backend = backend
        self.output = output
        self.clock = clock
        self.logger = logger
    }

    /// The pattern shown now (as the timeline has it, whether or not the loop has set the line yet).
    var pattern: LEDPattern { timeline.pattern(at: clock.now) }

    func update(_ change: @Sendable (inout LEDPattern.Facts) -> Void) {
        timeline.update(change)
        waker.ring()
    }

    /// DRS accepted an order: solid for three seconds.
    func orderPlaced() { raise(.orderPlaced) }

    /// A press that did nothing visible otherwise: one flash.
    func acknowledge() { raise(.acknowledged) }

    /// A press for a slot whose order is still open: two long flashes.
    func alreadyOrdered() { raise(.alreadyOrdered) }

    private func raise(_ signal: LightTimeline<C.Instant>.Signal) {
        timeline.raise(signal, at: clock.now)
        waker.ring()
    }

    /// Sets the line for now; returns when to look again.
    func step() -> LoopStep<C.Instant> {
        let next = timeline.next(at: clock.now)
        if next.pattern != shown {
            shown = next.pattern
            logger.debug("LED pattern", metadata: ["led.pattern": "\(next.pattern.rawValue)"])
        }
        let changed = level != next.on
        if changed { set(next.on) }
        return .wait(until: next.until, worked: false)
    }

    /// Until cancelled: sets the line, waits for the timeline's next instant or a change.
    func run() async {
        while !Task.isCancelled { await waker.wait(for: step(), clock: clock) }
    }

    func stop() {
        set(false)
    }

    private func set(_ on: Bool) {
        level = on
        guard let output else { return }
        do { try backend.setOutput(output, on: on) } catch {
            logger.warning("LED output failed", metadata: ["gpio.output": "\(output)", "error": "\(error.message)"])
        }
    }
}
