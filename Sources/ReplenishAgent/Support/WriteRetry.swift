/// A state file whose write failed (disk full, an I/O error) and is tried again, as one value for every owner of
/// one (the tokens' `RefreshTimeline`, the outbox's `OrderBook`): the failures in a row, and the wait before the next
/// try on the state-write backoff (5 s doubling to 5 minutes, with jitter: `Backoff.stateWrite`).
struct WriteRetry: Sendable {
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

/// Whether a state file holds what its owner holds in memory (`OrderBook`'s outbox): after a failed write (disk
/// full) the file is behind, the next change writes even when it changes nothing, and the write is tried again on
/// the state-write backoff (`WriteRetry`, with its own jitter source).
struct WriteHealth: Sendable {
    private var retry = WriteRetry()
    private var random: RandomSource
    /// The file is behind the outbox in memory (a write failed).
    private(set) var unwritten = false

    init(random: RandomSource) { self.random = random }

    /// A write failed: the file is behind; the wait before the next try.
    mutating func failed() -> Duration {
        unwritten = true
        return retry.failed(using: &random)
    }

    /// A write succeeded (or nothing is left to write); returns whether the file was behind until now.
    @discardableResult
    mutating func succeeded() -> Bool {
        defer { unwritten = false }
        retry.succeeded()
        return unwritten
    }
}
