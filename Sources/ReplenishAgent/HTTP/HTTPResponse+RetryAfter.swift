extension HTTPResponse {
    /// The longest `Retry-After` the agent honours: a server asking for more is held to an hour, so a damaged
    /// or hostile header cannot silence the device for days.
    static let longestRetryAfter = Duration.seconds(3600)

    /// `Retry-After` in delta-seconds, at most `longestRetryAfter`. HTTP dates are not used by LWA or DRS;
    /// such a header (or garbage) gives nil, and the caller's backoff applies.
    var retryAfter: Duration? {
        guard let text = header("retry-after"), let seconds = Int(text.trimmingSpaces), seconds >= 0 else {
            return nil
        }
        return min(.seconds(seconds), Self.longestRetryAfter)
    }
}
