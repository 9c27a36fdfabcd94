/// When the pairing port is served, as a value (the shape of `CodeLinking`): it takes the window's state, the
/// server's and the app's answer with the current instant, and says what to do; it reads no clock and opens no
/// port. `PairingWindowKeeper` carries its actions out.
///
/// The rules: the port is served while the window is open; when the pairing closed the window, it stays open
/// until the app has its answer (the 204), `answerGrace` at most; once the window has closed, that server is
/// stopped even if the window opens again meanwhile (the new window gets a new server, and a new answer); a
/// server that failed is not started again before `restartDelay`.
struct PairingPortTiming<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    enum Action: Equatable, Sendable {
        case startServer
        case stopServer
        /// Nothing to do before this instant (nil: before a change).
        case wait(until: Instant?)
    }

    /// What the service knows at the moment it asks.
    struct Facts: Sendable {
        /// When the window closes; nil: it is closed.
        var closesAt: Instant?
        /// The window was closed by a pairing (not by its time).
        var paired: Bool
        var serving: Bool
        /// The app has its pairing answer.
        var answered: Bool
    }

    static var answerGrace: Duration { .seconds(5) }
    static var restartDelay: Duration { .seconds(5) }

    private var answerDeadline: Instant?
    private var restartAt: Instant?
    /// The window closed while the server ran: it is being stopped.
    private var closing = false

    init() {}

    mutating func next(_ facts: Facts, at now: Instant) -> Action {
        if let restartAt {
            if now < restartAt { return .wait(until: restartAt) }
            self.restartAt = nil
        }
        guard facts.serving else { return facts.closesAt == nil ? .wait(until: nil) : .startServer }
        if let closesAt = facts.closesAt, !closing { return .wait(until: closesAt) }
        closing = true
        if facts.paired && !facts.answered {
            let deadline = answerDeadline ?? now.advanced(by: Self.answerGrace)
            answerDeadline = deadline
            if now < deadline { return .wait(until: deadline) }
        }
        return .stopServer
    }

    /// The server stopped; `failed`: it had failed on its own (not stopped), so the next start waits.
    mutating func stopped(failed: Bool, at now: Instant) {
        answerDeadline = nil
        closing = false
        if failed { restartAt = now.advanced(by: Self.restartDelay) }
    }
}
