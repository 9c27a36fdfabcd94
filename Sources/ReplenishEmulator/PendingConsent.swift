/// An authorization request whose consent page is shown and not answered yet (`--consent-page`).
struct PendingConsent: Sendable {
    var device: DeviceIdentity
    var redirectURI: String
    var challenge: String
    var challengeMethod: String
    var state: String?
}
