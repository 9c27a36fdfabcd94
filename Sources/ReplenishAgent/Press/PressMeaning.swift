/// What a recognised press means, as a value: `PressPolicy`'s decision and the facts it needs in, the actions out.
/// `PressHandler` gathers the facts (the level sensor's latch, a re-check of the slot's open order, whether
/// `Subscriptions` lets it order) and carries the actions out; this decides, and its tests need no actor.
enum PressMeaning {
    /// What is known of the press's slot when it is judged (only what the decision needs is asked for).
    struct Facts: Equatable, Sendable {
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

    /// Which facts a decision needs.
    struct Needs: Equatable, Sendable {
        var sensorLatch = false
        var openOrder = false
        var subscription = false
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

    static func needs<I>(_ decision: PressPolicy<I>.Decision) -> Needs {
        switch decision {
        case .order: Needs(openOrder: true, subscription: true)
        case .orderFromSensor: Needs(sensorLatch: true, subscription: true)
        default: Needs()
        }
    }

    /// The actions for `decision` given `facts`, in order. `input`: the board input pressed (for `unmapped`).
    static func actions<I>(for decision: PressPolicy<I>.Decision, facts: Facts, input: String) -> [Action] {
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
