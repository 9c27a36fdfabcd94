/// What pairing leaves on the device: the long-lived refresh token and the client id it belongs to, and the
/// current access token with its absolute (wall-clock) expiry, so a restart knows whether it is still good.
///
/// `tokens.json`'s format (see `StateFormat` for the rule): version 1 is these fields.
struct TokenSet: Sendable, Codable, Equatable, StateFormat {
    static let formatVersion = 1

    var version = TokenSet.formatVersion
    var clientId: String
    var refreshToken: Secret
    var accessToken: Secret
    /// Seconds since the Unix epoch at which the access token expires.
    var accessTokenExpiresAt: Double
    /// The lifetime LWA granted, in seconds (decides the refresh margin).
    var accessTokenLifetime: Double
    /// A random tag of this pairing (made when the customer paired; absent in token files written before
    /// tags existed). Outbox entries carry the tag they were pressed under, so a press made under an earlier
    /// pairing (another owner, after a reset or a revocation) is never ordered on this one's account.
    var pairingId: String? = nil
    /// The device the pairing was made for (serial, model, phase; absent in token files written before it was
    /// recorded). DRS knows the device by these: a pairing is good only for the identity it was made with.
    var identity: DeviceIdentity? = nil

    /// What changed from the identity this pairing was made for to `now` (`serial A → B`), or nil when nothing
    /// did or the file predates the record: only an identity that was recorded and differs is a change.
    func identityChange(to now: DeviceIdentity) -> String? {
        guard let identity, !identity.isSameDevice(as: now) else { return nil }
        return now.changes(from: identity)
    }

    /// The same tokens with an expiry the agent can compute with. A file whose expiry or lifetime is out of
    /// any sensible range (not finite, before 1970, past the year 5000, a lifetime under a second or over a
    /// year) keeps its refresh token, the pairing, and gets an access token treated as expired, so it is
    /// refreshed at once instead of the pairing being lost or arithmetic trapping on it.
    var withSaneExpiry: TokenSet {
        var sane = self
        if !(0...100_000_000_000).contains(accessTokenExpiresAt) || !(1...31_536_000).contains(accessTokenLifetime) {
            sane.accessTokenExpiresAt = 0
            sane.accessTokenLifetime = 3600
        }
        return sane
    }
}

/// What DRS knows a device by: a pairing made for one identity orders for it, and only for it.
struct DeviceIdentity: Sendable, Codable, Equatable {
    var serial: String
    var model: String
    /// `test`, `certification` or `production` (`AgentConfig.Phase`).
    var phase: String

    init(serial: String, model: String, phase: String) {
        self.serial = serial
        self.model = model
        self.phase = phase
    }

    init(_ device: AgentConfig.Device) {
        self.init(serial: device.serial, model: device.model, phase: device.phase.rawValue)
    }

    /// The same device as `other`: serials compared without regard to case (a serial file rewritten in lower
    /// case by a factory tool names the same unit; serials are `A-Z a-z 0-9` only, so ASCII case is all there
    /// is), model and phase exactly.
    func isSameDevice(as other: DeviceIdentity) -> Bool {
        serial.lowercased() == other.serial.lowercased() && model == other.model && phase == other.phase
    }

    /// Only the serial differs from `other` (model and phase are the same): what a serial file that reads
    /// wrong at one start looks like, as much as a unit whose serial file really changed.
    func differsOnlyInSerial(from other: DeviceIdentity) -> Bool {
        model == other.model && phase == other.phase && !isSameDevice(as: other)
    }

    /// What changed from `old` to this one, for the log and `status` (`serial SN1 → SN2, phase test →
    /// production`). Serials and models are not secrets.
    func changes(from old: DeviceIdentity) -> String {
        var parts: [String] = []
        if old.serial != serial { parts.append("serial \(old.serial) → \(serial)") }
        if old.model != model { parts.append("model \(old.model) → \(model)") }
        if old.phase != phase { parts.append("phase \(old.phase) → \(phase)") }
        return parts.joined(separator: ", ")
    }
}

/// One successful answer of the LWA token endpoint.
struct TokenGrant: Sendable, Equatable {
    var accessToken: Secret
    /// A new refresh token, when LWA rotated it (or on a code redemption).
    var refreshToken: Secret?
    var expiresIn: Double
}
