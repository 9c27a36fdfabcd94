import Foundation

/// An authorization code handed out by `/ap/oa`: single use, short-lived, bound to its PKCE challenge.
struct AuthorizationCode: Sendable, Codable {
    var device: DeviceIdentity
    var redirectURI: String
    var challenge: String
    /// `S256` or `plain`.
    var challengeMethod: String
    var expiresAt: Date
    var used = false
    /// Set by deregistration: the code can no longer be redeemed.
    var revoked = false
}
