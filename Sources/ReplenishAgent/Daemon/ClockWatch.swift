import Logging

/// A board without a battery clock starts in 1970: once NTP sets the time, what failed meanwhile (TLS
/// "certificate not yet valid") is retried at once instead of at the end of a long backoff.
enum ClockWatch {
    static func run<C: Clock>(
        clock: C, logger: Logger, isTrusted: @escaping @Sendable () -> Bool = { WallClock.isTrusted() },
        whenSet: @Sendable () async -> Void
    ) async throws where C.Duration == Duration {
        guard !isTrusted() else { return await Waker().wait(timeout: nil, clock: clock) }
        logger.notice("the wall clock is not set yet (before this build's date); waiting for it")
        while !isTrusted() && !Task.isCancelled { try await clock.loopSleep(for: .seconds(2)) }
        logger.notice("the wall clock is set now; retrying what waited for it")
        await whenSet()
        await Waker().wait(timeout: nil, clock: clock)
    }
}

extension ClockWatch {
    /// The watch as the daemon runs it: when the wall clock gets set, the token refresh and the outbox retry
    /// what failed meanwhile.
    struct Part<C: Clock>: DaemonPart where C.Duration == Duration {
        let clock: C
        let tokens: TokenManager<C>
        let orders: OrderService<C>
        let logger: Logger
        var description: String { "clock" }

        func work() async throws {
            try await ClockWatch.run(clock: clock, logger: logger) { [tokens, orders] in
                await tokens.retryNow()
                await orders.retryNow()
            }
        }
    }
}
