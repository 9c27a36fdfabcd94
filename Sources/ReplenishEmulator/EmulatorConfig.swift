/// The behaviour `serve` was asked for: which slots exist, lifetimes, and how refresh tokens rotate.
struct EmulatorConfig: Sendable {
    /// What happens to a refresh token once a refresh grant has handed out its successor.
    enum OldRefreshTokenPolicy: String, Sendable, CaseIterable {
        /// The previous token is invalid as soon as the new one is issued.
        case invalidate
        /// The previous token stays valid until the new one is first used in a refresh grant.
        case untilUsed = "until-used"
    }

    /// Slot ids that exist, in the order `subscriptionInfo` lists them.
    var slots: [String] = ["slot-1", "slot-2", "slot-3"]
    var accessTokenLifetime: Double = 3600
    var codeLifetime: Double = 300
    /// Code-based linking: how long a code pair can be entered, and the least time between two polls
    /// (an example pair: 600 s and 30 s).
    var codePairLifetime: Double = 600
    var codePairInterval: Double = 30
    /// Where the customer enters the code (shown by the device, never fetched by it).
    var verificationURI = "https://amazon.com/us/code"
    var rotateRefreshTokens = false
    /// `/ap/oa` shows a consent page that a test answers (`POST /ap/oa/consent`) instead of consenting at once.
    var consentPage = false
    var oldRefreshTokenPolicy: OldRefreshTokenPolicy = .untilUsed
    /// Send `expires_in` as a JSON string, as one Amazon page shows.
    var expiresInAsString = false
    /// Close every connection right after its answer is written, although the answer does not say
    /// `Connection: close`: a kept-alive connection dies between calls, as behind a load balancer.
    var closeAfterAnswer = false
    /// Drop (close unanswered, work not done) every non-admin request that is not the first on its connection:
    /// the server closed the idle kept-alive connection just as the client reused it.
    var dropReusedConnections = false
    /// The app's client secret: a refresh grant that sends `client_secret` must send this one (LWA answers
    /// `invalid_client` otherwise). Nil: any secret, or none, is accepted.
    var clientSecret: String? = nil
}
