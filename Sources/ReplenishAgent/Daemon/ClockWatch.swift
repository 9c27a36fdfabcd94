import Logging

/// A board without a battery clock starts in 1970: once NTP sets the time, what failed meanwhile (TLS
/// "certificate not yet valid") is retried at once instead of at the end of a long backoff. The timing is
/// `WallClockWait`'s; this carries it out.
enum ClockWatch {
    static func run<C: Clock>(
        clock: C, logger: Logger, isTrusted: @escaping @Sendable () -> Bool = { WallClock.isTrusted() },
        whenSet: @Sendable () async -> Void
    ) async throws where C.Duration == Duration {
        var wait = WallClockWait<C.Instant>()
        while !Task.isCancelled {
            switch wait.next(trusted: isTrusted(), at: clock.now) {
            case .idle:
                return
            case .sayWaiting:
                logger.notice("the wall clock is not set yet (before this build's date); waiting for it")
            case .look(let until):
                try await clock.loopSleep(until: until)
            case .clockSet:
                logger.notice("the wall clock is set now; retrying what waited for it")
                await whenSet()
            }
        }
    }
}

/// When the wall clock is looked at, as a value: a clock trusted at start is never looked at again; one that is
/// not is looked at every `look` until it is, which is said once each way.
struct WallClockWait<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    enum Action: Equatable, Sendable {
        /// Nothing more to do.
        case idle
        /// The clock is not set: say so (once).
        case sayWaiting
        /// Look at the clock again at this instant.
        case look(until: Instant)
        /// The clock was found set after the wait: retry what waited for it.
        case clockSet
    }

    static var look: Duration { .seconds(2) }

    private enum Phase { case start, waiting, done }
    private var phase = Phase.start

    init() {}

    mutating func next(trusted: Bool, at now: Instant) -> Action {
        switch phase {
        case .start:
            phase = trusted ? .done : .waiting
            return trusted ? .idle : .sayWaiting
        case .waiting:
            if trusted {
                phase = .done
                return .clockSet
            }
            return .look(until: now.advanced(by: Self.look))
        case .done:
            return .idle
        }
    }
}

extension ClockWatch {
    /// The watch as the daemon runs it: when the wall clock gets set, the token refresh and the outbox retry
    /// what failed meanwhile. A clock trusted (at start, or once set) ends it, and the group runs on (`mayEnd`).
    struct Part<C: Clock>: DaemonPart where C.Duration == Duration {
        let clock: C
        let tokens: TokenManager<C>
        let orders: DeliveryLoop<C>
        let logger: Logger
        var description: String { "clock" }
        var mayEnd: Bool { true }

        func work() async throws {
            try await ClockWatch.run(clock: clock, logger: logger) { [tokens, orders] in
                await tokens.retryNow()
                await orders.retryNow()
            }
        }
    }
}
