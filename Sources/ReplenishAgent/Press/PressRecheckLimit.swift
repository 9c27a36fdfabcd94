/// What a press may ask DRS again, for the press path (`OrderTracker.recheck`, an open order's state;
/// `Subscriptions.allowsPress`, the subscriptions): at most once a `spacing`, as a value: the spacing counts from the
/// question (a failing DRS is not asked on every press either), and starts over for another `Key` (a slot's
/// newer order). Within the spacing, the answer the last question got (nil: it got none).
struct PressRecheckLimit<Instant: InstantProtocol, Key: Equatable & Sendable, Answer: Sendable>: Sendable
where Instant.Duration == Duration {
    enum Decision {
        case ask
        /// Asked within the spacing: what that question found (nil: nothing).
        case askedRecently(Answer?)
    }

    /// A minute: the rule every press-driven re-check follows.
    static var spacing: Duration { .seconds(60) }

    private var last: (key: Key, at: Instant, answer: Answer?)?

    init() {}

    /// Whether a press may ask now; `.ask` counts as the question (its answer comes through `record`).
    mutating func decide(_ key: Key, at now: Instant) -> Decision {
        if let last, last.key == key, now < last.at.advanced(by: Self.spacing) { return .askedRecently(last.answer) }
        last = (key, now, nil)
        return .ask
    }

    mutating func record(_ answer: Answer) {
        last?.answer = answer
    }
}
