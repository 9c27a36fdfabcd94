import NIOCore

/// The request deadline of one connection as a value (the shape of `CodeLinking`): events go in with the
/// event loop's instant, actions come out; it reads no clock and touches no channel. `RequestDeadline` feeds
/// it and carries its actions out.
///
/// The rule: a request (head and body) must arrive whole within `limit` of the connection's start or of the
/// previous answer's end, or the connection is closed (a peer trickling a byte now and then included); while
/// a request is being answered nothing is timed (a companionInfo waiting for LWA, a held press).
struct RequestDeadlineMachine: Sendable {
    enum Event: Sendable, Equatable {
        /// The connection's pipeline is in place: the first request is owed from `at`.
        case started(at: NIODeadline)
        /// A request's end was read: it is being answered, and not timed.
        case requestComplete
        /// An answer's end was written: the next request is owed from `at`.
        case answerSent(at: NIODeadline)
        /// The timer of the last `.arm` went off.
        case timerFired(at: NIODeadline)
        /// The connection closed (or the handler left it): nothing more is timed.
        case ended
    }

    enum Action: Sendable, Equatable {
        case none
        /// Set the connection's one timer to go off at `deadline`, in place of any set before.
        case arm(deadline: NIODeadline)
        case cancelTimer
        /// The request is late: close the connection now.
        case close
    }

    private enum Phase: Sendable, Equatable {
        case notStarted
        /// A request is owed by `deadline`.
        case owing(deadline: NIODeadline)
        case answering
        case ended
    }

    /// How long a request may take to arrive whole (`LocalHTTPServer.Limits.requestDeadline`).
    let limit: TimeAmount
    private var phase = Phase.notStarted

    init(limit: TimeAmount) { self.limit = limit }

    /// Whether a complete request is being answered (the connection is busy, not slow).
    var isAnswering: Bool { phase == .answering }

    mutating func handle(_ event: Event) -> Action {
        if phase == .ended { return .none }
        switch event {
        case .started(let now), .answerSent(let now):
            phase = .owing(deadline: now + limit)
            return .arm(deadline: now + limit)
        case .requestComplete:
            phase = .answering
            return .cancelTimer
        case .timerFired(let now):
            guard case .owing(let deadline) = phase else { return .none }
            // A timer that went off early (it never should) is set again for what is left.
            return now >= deadline ? .close : .arm(deadline: deadline)
        case .ended:
            phase = .ended
            return .cancelTimer
        }
    }
}
