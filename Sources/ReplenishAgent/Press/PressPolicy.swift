/// What a recognised press means, given the device's state. Pure; `PressHandler` carries the decision out.
///
/// - A short press orders for its button's slot, unless the slot's cooldown (after the last accepted order
///   from this device) is running: then it is only acknowledged on the LED, not re-ordered.
/// - A long press on a paired device arms re-pairing for `confirmationWindow`; a second long press within
///   the window confirms it (the device deregisters and goes back to pairing mode); a short press cancels.
///   On an unpaired device a long press (re)opens the pairing window (`PairingWindow`).
/// - A level sensor going low orders for its slot (the sensor's own hysteresis stops flapping).
struct PressPolicy<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    enum Decision: Equatable, Sendable {
        case order(slot: String)
        case orderFromSensor(slot: String)
        /// A level sensor's slot was refilled: its next low may order again.
        case sensorRefilled(slot: String)
        case acknowledgeOnly(reason: String)
        case armRepairing
        case confirmRepairing
        case cancelRepairing
        case openPairingWindow
        case unmapped
    }

    let confirmationWindow: Duration
    private(set) var repairingArmedUntil: Instant?
    private var lastOrderAt: [String: Instant] = [:]

    init(confirmationWindow: Duration = .seconds(30)) { self.confirmationWindow = confirmationWindow }

    func isRepairingArmed(at now: Instant) -> Bool { repairingArmedUntil.map { now < $0 } ?? false }

    mutating func decide(_ kind: ButtonPress.Kind, slot: String?, cooldown: Duration, paired: Bool, at now: Instant)
        -> Decision
    {
        let armed = isRepairingArmed(at: now)
        if !armed { repairingArmedUntil = nil }
        switch kind {
        case .long:
            guard paired else { return .openPairingWindow }
            if armed {
                repairingArmedUntil = nil
                return .confirmRepairing
            }
            repairingArmedUntil = now.advanced(by: confirmationWindow)
            return .armRepairing
        case .short:
            if armed {
                repairingArmedUntil = nil
                return .cancelRepairing
            }
            guard let slot else { return .unmapped }
            if let last = lastOrderAt[slot], last.duration(to: now) < cooldown {
                return .acknowledgeOnly(
                    reason: "an order for slot \(slot) was just placed; press acknowledged (cooldown)")
            }
            return .order(slot: slot)
        case .low:
            guard let slot else { return .unmapped }
            return .orderFromSensor(slot: slot)
        case .refilled:
            guard let slot else { return .unmapped }
            return .sensorRefilled(slot: slot)
        }
    }

    /// An order for `slot` was accepted at `time`: its cooldown starts.
    mutating func orderAccepted(slot: String, at time: Instant) { lastOrderAt[slot] = time }
}
