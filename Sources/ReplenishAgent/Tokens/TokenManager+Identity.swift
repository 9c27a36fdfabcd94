/// The pairing's identity: what changed since it was made, and the hold a serial in doubt puts on it
/// (`SerialWatch`). Its state (`identity`, `heldBecause`) is the token manager's, read here and in `TokenManager`
/// only.
extension TokenManager {
    /// The pairing was made for another identity than the device's now (`identity`): what changed, or nil
    /// when it was not (or the token file predates the record, or nothing is paired). Only an identity that was
    /// read and differs is a change: a serial that cannot be read stops the start before this is asked.
    var identityChange: String? { identity.flatMap { currentTokens?.identityChange(to: $0) } }

    /// The identity the pairing was made for (nil when unpaired or recorded by no build yet).
    var pairedIdentity: DeviceIdentity? { currentTokens?.identity }

    /// The pairing orders nothing, and is not refreshed, until `release`: `reason` is what `status` says.
    func hold(reason: String) {
        guard heldBecause != reason else { return }
        heldBecause = reason
        notifyChange()
    }

    /// The serial in doubt reads as the pairing's again (`identity`, its case as read): the pairing is used again,
    /// and a later pairing in this run records this identity, not the one read at the start.
    func release(identity: DeviceIdentity) {
        self.identity = identity
        guard heldBecause != nil else { return }
        heldBecause = nil
        waker.ring()
        notifyChange()
    }
}
