/// A state file whose write failed (disk full, an I/O error) and is tried again, as one value for every owner of
/// one (the tokens' `RefreshTimeline`, the outbox's `OrderBook`): the failures in a row, and the wait before the next
/// try on the state-write backoff (5 s doubling to 5 minutes, with jitter: `Backoff.stateWrite`).
struct WriteRetry: Sendable, Equatable {
    /// Writes that failed in a row.
    private(set) var failures = 0

    /// A write failed: the wait before the next try.
    mutating func failed<R: RandomNumberGenerator>(using random: inout R) -> Duration {
        failures += 1
        return Backoff.stateWrite.delay(attempt: failures, using: &random)
    }

    /// A write succeeded (or nothing is left to write).
    mutating func succeeded() {
        failures = 0
    }
}
