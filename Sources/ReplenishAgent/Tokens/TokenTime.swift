/// Where the token manager's times and chances come from: the clock its schedule runs on, the waker that ends the
/// schedule's wait early (a pairing, a refresh, a release), the wall clock that stamps the tokens' expiries, and its
/// one random source (the pairing tags, and the schedule's jitter, start-up moments and backoffs, which
/// `RefreshTimeline` draws with it).
struct TokenTime<C: Clock>: Sendable where C.Duration == Duration {
    let clock: C
    let wallTime: @Sendable () -> Double
    let waker = Waker()
    var random: RandomSource

    /// A new pairing's tag: two random 64-bit numbers in hex.
    mutating func pairingTag() -> String {
        (0..<2).map { _ in String(UInt64.random(in: .min ... .max, using: &random), radix: 16) }
            .joined(separator: "-")
    }
}
