/// The pairing's identity: what changed since it was made, and the hold a serial in doubt puts on it
/// (`SerialWatch`). Its state is the token manager's `serialHold` (`SerialHold`, which alone says whether the hold
/// applies).
extension TokenManager {
    /// The pairing was made for another identity than the device's now (`SerialHold.identity`): what changed, or nil
    /// when it was not (or the token file predates the record, or nothing is paired). Only an identity that was
    /// read and differs is a change: a serial that cannot be read stops the start before this is asked.
    var identityChange: String? { serialHold.identity.flatMap { currentTokens?.identityChange(to: $0) } }

    /// The identity the pairing was made for (nil when unpaired or recorded by no build yet).
    var pairedIdentity: DeviceIdentity? { currentTokens?.identity }

    /// The pairing orders nothing, and is not refreshed, until `release`: `reason` is what `status` says.
    func hold(reason: String) {
        guard serialHold.hold(reason: reason) else { return }
        notifyChange()
    }

    /// The serial in doubt reads as the pairing's again (`identity`, its case as read): the pairing is used again,
    /// and a later pairing in this run records this identity, not the one read at the start.
    func release(identity: DeviceIdentity) {
        guard serialHold.release(identity: identity) else { return }
        time.waker.ring()
        notifyChange()
    }
}
