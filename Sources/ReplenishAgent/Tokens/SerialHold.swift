/// The device's identity as the token manager knows it, and the hold a serial in doubt puts on the pairing
/// (`SerialWatch`, `SerialSettling`): the serial read differs from the pairing's and may be a glitch. While the
/// hold applies, no access token is handed out and no refresh is made (where LWA rotates refresh tokens, a refresh
/// by a clone would end the original unit's pairing), until `release` or a new pairing. `refusal` is the one place
/// that says whether it applies; every use of the pairing asks it.
struct SerialHold: Sendable {
    /// The device's identity now (from the config): recorded with every pairing made, and at the first start with
    /// a token file that has none yet (`TokenManager.recordMissingIdentity`). A serial in doubt that reads as the
    /// pairing's again replaces it (`release`).
    private(set) var identity: DeviceIdentity?
    /// Why the pairing orders nothing although it is kept (what `status` says), nil when it is not held.
    private(set) var reason: String?

    init(identity: DeviceIdentity?) {
        self.identity = identity
    }

    /// Whether the hold applies: nil when the pairing may be used, else the error a use of it answers with (callers
    /// wait for the next token event, as when unpaired).
    var refusal: AgentError? { reason.map { AgentError(.notPaired, $0) } }

    /// Holds the pairing for `reason`; false when it was held for that reason already.
    mutating func hold(reason: String) -> Bool {
        guard self.reason != reason else { return false }
        self.reason = reason
        return true
    }

    /// The serial in doubt reads as the pairing's again (`identity`, its case as read): a later pairing in this run
    /// records this identity. Returns whether a hold ended.
    mutating func release(identity: DeviceIdentity) -> Bool {
        self.identity = identity
        let wasHeld = reason != nil
        reason = nil
        return wasHeld
    }

    /// A new pairing, or none: the hold ends with the pairing it held.
    mutating func pairingChanged() {
        reason = nil
    }
}
