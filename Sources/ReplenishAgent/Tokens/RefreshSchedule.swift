/// When to refresh an access token: at a margin before its absolute expiry. The margin is a quarter of the
/// lifetime for short lifetimes (2.5 s of a 10 s token) and five minutes for long ones, less a random part of
/// up to a fifth of the margin so that many devices paired at once do not refresh at the same second.
enum RefreshSchedule {
    static let longestMargin = 300.0

    static func margin(lifetime: Double) -> Double { min(max(lifetime * 0.25, 1), longestMargin) }

    /// Seconds from `now` until the refresh is due (zero or less: due now). `jitter` is in [0, 1).
    static func secondsUntilRefresh(now: Double, expiresAt: Double, lifetime: Double, jitter: Double) -> Double {
        let margin = margin(lifetime: lifetime)
        return expiresAt - margin - margin * 0.2 * jitter - now
    }

    /// The connect timeout of a DRS request (10 s) plus two seconds for sending it: a token with less left
    /// than this could reach DRS after it expired.
    static let longestSendMargin = 12.0

    /// How close to expiry an access token is no longer handed out: the time a request may take to reach DRS
    /// (`longestSendMargin`), but never more than a fifth of the lifetime (a 10 s token keeps 2 s, or it would
    /// never be usable), and at least 2 s.
    static func sendMargin(lifetime: Double) -> Double { min(max(lifetime * 0.2, 2), longestSendMargin) }

    /// True when a request sent now could reach DRS after the token expired: refresh first.
    static func isTooCloseToExpiry(now: Double, expiresAt: Double, lifetime: Double) -> Bool {
        now >= expiresAt - sendMargin(lifetime: lifetime)
    }
}
