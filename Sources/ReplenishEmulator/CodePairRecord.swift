import Foundation

/// A code pair handed out by `POST /auth/O2/create/codepair` (code-based linking), kept by its device code.
struct CodePairRecord: Sendable, Codable {
    var userCode: String
    var device: DeviceIdentity
    var expiresAt: Date
    /// The least time between two polls, in seconds: the interval given, plus 5 s for every `slow_down`.
    var interval: Double
    /// When the pair was made, then when it was last polled: the next poll must come `interval` after it.
    var lastPollAt: Date
    /// The customer entered the user code (`POST /admin/enter-code`).
    var entered = false
    /// The tokens were handed out: the pair cannot be redeemed again.
    var used = false
    /// Set by deregistration: the pair can no longer be redeemed.
    var revoked = false
}
