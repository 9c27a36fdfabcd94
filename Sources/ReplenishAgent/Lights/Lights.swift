import Logging

/// Drives the device's LED from what the daemon knows (`LEDPattern.Facts`). Blinking patterns run a timer
/// task only while they are shown; steady patterns set the line once.
actor Lights<C: Clock> where C.Duration == Duration {
    private let backend: any GPIOBackend
    private let output: String?
    private let clock: C
    private let logger: Logger
    private var facts = LEDPattern.Facts()
    private var shown: LEDPattern?
    private var blinker: Task<Void, Never>?
    private var placedTimer: Task<Void, Never>?
    private var acknowledgeTimer: Task<Void, Never>?
    private var alreadyOrderedTimer: Task<Void, Never>?

    init(backend: any GPIOBackend, output: String?, clock: C, logger: Logger) {
        self.backend = backend
        self.output = output
        self.clock = clock
        self.logger = logger
    }

    var pattern: LEDPattern { shown ?? .off }

    func update(_ change: @Sendable (inout LEDPattern.Facts) -> Void) {
        change(&facts)
        refresh()
    }

    /// DRS accepted an order: solid for three seconds.
    func orderPlaced() { raise(\.orderJustPlaced, for: .seconds(3), timer: &placedTimer) }

    /// A press that did nothing visible otherwise: one flash.
    func acknowledge() { raise(\.acknowledging, for: .milliseconds(600), timer: &acknowledgeTimer) }

    /// A press for a slot whose order is still open: two long flashes.
    func alreadyOrdered() { raise(\.alreadyOrdered, for: .seconds(2), timer: &alreadyOrderedTimer) }

    /// Sets a transient fact and clears it after `duration` (a newer raise restarts the time).
    private func raise(
        _ fact: WritableKeyPath<LEDPattern.Facts, Bool> & Sendable, for duration: Duration,
        timer: inout Task<Void, Never>?
    ) {
        facts[keyPath: fact] = true
        refresh()
        timer?.cancel()
        timer = Task { [clock] in
            do { try await clock.loopSleep(for: duration) } catch { return }
            self.update { $0[keyPath: fact] = false }
        }
    }

    func stop() {
        blinker?.cancel()
        placedTimer?.cancel()
        acknowledgeTimer?.cancel()
        alreadyOrderedTimer?.cancel()
        set(false)
    }

    private func refresh() {
        let next = LEDPattern.pattern(for: facts)
        guard next != shown else { return }
        shown = next
        logger.debug("LED pattern", metadata: ["led.pattern": "\(next.rawValue)"])
        blinker?.cancel()
        blinker = nil
        guard let steps = next.steps else {
            set(next.steadyOn)
            return
        }
        blinker = Task { [clock] in
            while !Task.isCancelled {
                for step in steps {
                    self.set(step.on)
                    do { try await clock.loopSleep(for: .milliseconds(step.milliseconds)) } catch { return }
                }
            }
        }
    }

    private func set(_ on: Bool) {
        guard let output else { return }
        do { try backend.setOutput(output, on: on) } catch {
            logger.warning("LED output failed", metadata: ["gpio.output": "\(output)", "error": "\(error.message)"])
        }
    }
}
