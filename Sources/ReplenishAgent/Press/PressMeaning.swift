/// What a recognised press means, as values: `PressPolicy` decides what the press is (an order, a gesture), and
/// `actions` what follows from that decision and the facts it needed. `PressHandler` asks the facts (the level
/// sensor's latch, a re-check of the slot's open order, whether `Subscriptions` lets it order) and carries the
/// actions out; this decides, and its tests need no actor.
enum PressMeaning {
    /// What a press is, given the device's state (`PressPolicy.decide`).
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

    /// What is known of the press's slot when it is judged (only what the decision needs is asked for).
    struct Facts: Sendable {
        /// A level sensor of the slot ordered and no refill has been seen since.
        var sensorLatched = false
        /// The slot's last order is still open at DRS (as just re-checked), with DRS's word for its state; nil
        /// when there is none or DRS could not be asked (the press is then taken as an order).
        var openOrder: OpenOrder?
        /// `Subscriptions` lets the slot order.
        var subscribed = true

        init(sensorLatched: Bool = false, openOrder: OpenOrder? = nil, subscribed: Bool = true) {
            self.sensorLatched = sensorLatched
            self.openOrder = openOrder
            self.subscribed = subscribed
        }
    }

    struct OpenOrder: Equatable, Sendable {
        var state: String?
    }

    /// What the LED shows because of a press (`Lights` follows these; nothing else drives it from a press).
    enum Signal: Equatable, Sendable {
        case acknowledged
        case alreadyOrdered
        case repairingArmed(Bool)
    }

    enum Action: Equatable, Sendable {
        /// The press's answer (to whoever caused it: the control socket's `press`).
        case answer(String)
        /// The press's answer: refused, with why.
        case refuse(AgentError.Code, String)
        case signal(Signal)
        case recordRefill(slot: String)
        case recordPressWhileOpen(slot: String, state: String?)
        /// Give the press to the outbox; what follows is `accepted(_:slot:fromSensor:button:)`, or the refusal.
        case order(slot: String, fromSensor: Bool)
        /// Report the slot's contents to DRS (`Duties`' slot-status duty).
        case reportSlotStatus(slot: String, report: SlotStatusReport)
        case confirmRepairing
        case openPairingWindow
    }

    /// The actions for `decision` given `facts`, in order. `input`: the board input pressed (for `unmapped`).
    static func actions(for decision: Decision, facts: Facts, input: String) -> [Action] {
        switch decision {
        case .orderFromSensor(let slot) where facts.sensorLatched:
            return [.answer("slot \(slot) was already ordered while low; waiting for a refill")]
        case .order(let slot) where facts.openOrder != nil:
            let state = facts.openOrder?.state
            return [
                .recordPressWhileOpen(slot: slot, state: state), .signal(.alreadyOrdered),
                .answer(
                    "slot \(slot) is already ordered (\(state ?? "placed"), not yet shipped); press recorded, no new order"
                ),
            ]
        case .order(let slot), .orderFromSensor(let slot):
            guard facts.subscribed else {
                return [.signal(.acknowledged), .refuse(.accessDenied, "slot \(slot) is not subscribed")]
            }
            let fromSensor = if case .orderFromSensor = decision { true } else { false }
            return [.order(slot: slot, fromSensor: fromSensor)]
        case .sensorRefilled(let slot):
            return [.recordRefill(slot: slot), .answer("slot \(slot) refilled")]
        case .acknowledgeOnly(let reason):
            return [.signal(.acknowledged), .answer(reason)]
        case .armRepairing:
            return [.answer("re-pairing armed: long-press again within 30 s to confirm, or short-press to cancel")]
        case .cancelRepairing:
            return [.signal(.acknowledged), .answer("re-pairing cancelled")]
        case .confirmRepairing:
            return [.confirmRepairing]
        case .openPairingWindow:
            return [.openPairingWindow]
        case .unmapped:
            return [.refuse(.invalidInput, "input \(input) is not mapped to a slot")]
        }
    }

    /// What follows a press the outbox took (`acceptance`): the slot's status reported to DRS when the press
    /// says something of the slot's contents (a new order, or any low of a level sensor) and the slot can be
    /// measured (a sensor, or a button whose slot has configured quantities: `ConsumptionRate`), then the answer.
    static func accepted(
        _ acceptance: OrderBook.Acceptance, slot: String, fromSensor: Bool, button: AgentConfig.Button?
    ) -> [Action] {
        var actions: [Action] = []
        if acceptance.kind == .queued || fromSensor, fromSensor || button?.quantity != nil,
            let report = ConsumptionRate.report(
                history: acceptance.consumedAt, quantity: button?.quantity,
                remainingWhenLow: button?.remainingWhenLow ?? 0)
        {
            actions.append(.reportSlotStatus(slot: slot, report: report))
        }
        let answer =
            switch acceptance.kind {
            case .queued: "order for slot \(slot) queued"
            case .coalesced: "an order for slot \(slot) is already pending; press recorded"
            }
        return actions + [.answer(answer)]
    }

    /// A press the outbox refused (not paired, the disk): the LED acknowledges it, the answer says why.
    static func refused(_ error: AgentError) -> [Action] {
        [.signal(.acknowledged), .refuse(error.code, error.message)]
    }
}

/// What a recognised press is, given the device's state: the cooldowns and the re-pairing gesture it remembers.
/// Pure; `PressMeaning.actions` says what follows, `PressHandler` carries it out.
///
/// - A short press orders for its button's slot, unless the slot's cooldown (after the last accepted order
///   from this device) is running: then it is only acknowledged on the LED, not re-ordered.
/// - A long press on a paired device arms re-pairing for `confirmationWindow`; a second long press within
///   the window confirms it (the device deregisters and goes back to pairing mode); a short press cancels.
///   On an unpaired device a long press (re)opens the pairing window (`PairingWindow`).
/// - A level sensor going low orders for its slot (the sensor's own hysteresis stops flapping).
struct PressPolicy<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    let confirmationWindow: Duration
    private(set) var repairingArmedUntil: Instant?
    private var lastOrderAt: [String: Instant] = [:]

    init(confirmationWindow: Duration = .seconds(30)) { self.confirmationWindow = confirmationWindow }

    func isRepairingArmed(at now: Instant) -> Bool { repairingArmedUntil.map { now < $0 } ?? false }

    mutating func decide(_ kind: ButtonPress.Kind, slot: String?, cooldown: Duration, paired: Bool, at now: Instant)
        -> PressMeaning.Decision
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
