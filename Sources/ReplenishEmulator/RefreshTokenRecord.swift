/// An issued refresh token (`Atzr|…`) and its place in a rotation chain.
struct RefreshTokenRecord: Sendable, Codable {
    var deviceKey: String
    var clientId: String
    var revoked = false
    /// Whether a refresh grant has presented this token yet.
    var used = false
    /// Under `--old-refresh-token-policy until-used`: the token this one replaced, which dies when this one is
    /// first used.
    var predecessor: String?
}
