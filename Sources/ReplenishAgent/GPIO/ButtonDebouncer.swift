/// Turns one input's raw edges into presses. An edge only counts once the line has kept its new level for
/// the debounce period, so any bounce burst ends as exactly one change; a press's length (first stable
/// active edge to last stable release edge) decides short or long. Pure: the caller passes times and calls
/// `tick` at `deadline`.
struct ButtonDebouncer<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    enum Action: Equatable, Sendable {
        case shortPress(held: Duration)
        case longPress(held: Duration)
    }

    let debounce: Duration
    let longPress: Duration
    /// The debounced level.
    private(set) var isActive = false
    private var rawActive = false
    private var lastEdgeAt: Instant?
    private var pressStartedAt: Instant?

    init(debounce: Duration, longPress: Duration) {
        self.debounce = debounce
        self.longPress = longPress
    }

    /// When `tick` must next be called, if a level change is waiting to settle.
    var deadline: Instant? {
        guard rawActive != isActive, let lastEdgeAt else { return nil }
        return lastEdgeAt.advanced(by: debounce)
    }

    /// A raw edge (or a level report: repeats of the same level are harmless).
    mutating func edge(active: Bool, at time: Instant) {
        if active != rawActive || lastEdgeAt == nil { lastEdgeAt = time }
        rawActive = active
    }

    /// Settles a pending change whose debounce period has passed; returns the press it completes, if any.
    mutating func tick(at now: Instant) -> Action? {
        guard let deadline, deadline <= now, let edgeAt = lastEdgeAt else { return nil }
        isActive = rawActive
        if isActive {
            pressStartedAt = edgeAt
            return nil
        }
        guard let started = pressStartedAt else { return nil }
        pressStartedAt = nil
        let held = started.duration(to: edgeAt)
        return held >= longPress ? .longPress(held: held) : .shortPress(held: held)
    }
}
