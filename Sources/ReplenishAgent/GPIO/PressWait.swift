/// How long whoever caused a press (the control socket's `press`) waits, as a value: for the press to be
/// recognised, up to its `timeout`; once it is, for the handler's outcome, up to `outcomeLimit` more.
struct PressWait<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    enum Action: Equatable, Sendable {
        case wait(until: Instant)
        /// No press was recognised within the timeout.
        case notRecognised
        /// Recognised, but the handler has not answered within the limit.
        case outcomeUnknown
    }

    static var outcomeLimit: Duration { .seconds(100) }

    /// How long a simulated press held for `hold` waits to be recognised: the debounce on both edges plus the
    /// hold, with room for a slow disk.
    static func timeout(hold: Duration, debounce: Duration) -> Duration {
        hold + debounce * 2 + .seconds(10)
    }

    private let timeoutAt: Instant
    private var limitAt: Instant?

    init(startedAt now: Instant, timeout: Duration) {
        timeoutAt = now.advanced(by: timeout)
    }

    mutating func next(recognised: Bool, at now: Instant) -> Action {
        if let limitAt { return now < limitAt ? .wait(until: limitAt) : .outcomeUnknown }
        if now < timeoutAt { return .wait(until: timeoutAt) }
        guard recognised else { return .notRecognised }
        let limit = now.advanced(by: Self.outcomeLimit)
        limitAt = limit
        return .wait(until: limit)
    }
}
