/// The code of code-based linking as the customer sees it, while it can be entered: the code, where to enter
/// it, and until when (wall-clock seconds since 1970). What the daemon publishes (LED, status file) and
/// `status` shows; never the device code, which stays in `CodeLinking`.
struct LinkingCode: Sendable, Equatable, Codable {
    var userCode: String
    var verificationURI: String
    var expiresAt: Double
}
