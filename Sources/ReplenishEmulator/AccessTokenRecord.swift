import Foundation

/// An issued access token (`Atza|…`): which device it speaks for and until when.
struct AccessTokenRecord: Sendable, Codable {
    var deviceKey: String
    var expiresAt: Date
    var revoked = false

    func isValid(at now: Date) -> Bool { !revoked && now < expiresAt }
}
