/// What pairing leaves on the device: the long-lived refresh token and the client id it belongs to, and the
/// current access token with its absolute (wall-clock) expiry, so a restart knows whether it is still good.
struct TokenSet: Sendable, Codable, Equatable {
    var version = 1
    var clientId: String
    var refreshToken: Secret
    var accessToken: Secret
    /// Seconds since the Unix epoch at which the access token expires.
    var accessTokenExpiresAt: Double
    /// The lifetime LWA granted, in seconds (decides the refresh margin).
    var accessTokenLifetime: Double
}

/// One successful answer of the LWA token endpoint.
struct TokenGrant: Sendable {
    var accessToken: Secret
    /// A new refresh token, when LWA rotated it (or on a code redemption).
    var refreshToken: Secret?
    var expiresIn: Double
}
