/// The token refresh as the token manager tracks it: when to refresh, retry and write again (the timeline, whose
/// one retry gate the schedule and every caller of `accessToken()` share: callers fail fast with the wait in
/// `retryAfter`), the refresh out now (single-flight: callers join it), and the pairing's check of the client
/// secret that LWA did not answer (why, until a refresh succeeds).
struct RefreshState<Instant: InstantProtocol> where Instant.Duration == Duration {
    var timeline: RefreshTimeline<Instant>
    var inFlight: Task<TokenSet, any Error>?
    var secretUnchecked: String?

    /// The tokens in memory are newer than the file (a write failed: disk full, I/O error). Until a retried write
    /// succeeds they are the device's only copy of the pairing; the superseded refresh token on disk is never sent
    /// again.
    var unsaved: Bool { timeline.writeRetryAt != nil }

    /// Paired or unpaired: the retry state starts over and the secret's check with it.
    mutating func pairingChanged() {
        secretUnchecked = nil
        timeline.pairingChanged()
    }
}
