import Logging

/// Carries out what a recognised press means: `PressPolicy` decides (cooldown, re-pairing from a long press),
/// `PressMeaning` says what follows from that and the facts this gathers, and this carries the actions out
/// through `PressEffects` (the outbox, a press recorded on an open order, a refill, a slot-status report, the
/// LED's signals). Its answer goes back to whoever caused the press (the control socket's `press`).
actor PressHandler<C: Clock> where C.Duration == Duration {
    private let config: AgentConfig
    private let effects: any PressEffects
    private let clock: C
    private let logger: Logger
    private var policy = PressPolicy<C.Instant>()

    init(config: AgentConfig, effects: any PressEffects, clock: C, logger: Logger) {
        self.config = config
        self.effects = effects
        self.clock = clock
        self.logger = logger
    }

    func handle(_ press: ButtonPress) async -> Result<String, AgentError> {
        // A long press on a unit without a network is the Wi-Fi setup's (docs/wifi-setup.md).
        if press.kind == .long, let answer = await effects.wifiSetupLongPress() {
            logger.notice("long press: \(answer)")
            return .success(answer)
        }
        let now = clock.now
        // Only a long press's meaning depends on the pairing (re-pair, or open the window); an order's pairing is
        // checked once, by the outbox's accept.
        let paired = press.kind == .long ? await effects.isPaired() : true
        let decision = policy.decide(
            press.kind, slot: config.slot(forInput: press.input), cooldown: config.cooldown(forInput: press.input),
            paired: paired, at: now)
        effects.signal(.repairingArmed(policy.isRepairingArmed(at: now)))
        let facts = await gather(PressMeaning.needs(decision), for: decision)
        if case .orderFromSensor(let slot) = decision, facts.sensorLatched {
            logger.info(
                "level sensor low again before a refill was seen: no new order", metadata: ["order.slot": "\(slot)"])
        }
        if case .armRepairing = decision {
            logger.notice("long press: re-pairing armed; long-press again within 30 s to confirm, short press cancels")
        }
        var answer: Result<String, AgentError> = .failure(AgentError(.invalidInput, "the press was not answered"))
        var actions = PressMeaning.actions(for: decision, facts: facts, input: press.input)
        while !actions.isEmpty {
            switch actions.removeFirst() {
            case .answer(let text): answer = .success(text)
            case .refuse(let code, let message): answer = .failure(AgentError(code, message))
            case .signal(let signal): effects.signal(signal)
            case .recordRefill(let slot):
                do {
                    try await effects.recordRefill(slot: slot)
                    logger.info(
                        "level sensor: refill seen; the next low orders again", metadata: ["order.slot": "\(slot)"])
                } catch {
                    // Not saved: the latch stays, and the sensor will not order at the next low. The customer's
                    // button still orders; the log says why the sensor did not.
                    logger.error(
                        "could not record the refill", metadata: ["order.slot": "\(slot)", "error": "\(error.message)"])
                    return .failure(error)
                }
            case .recordPressWhileOpen(let slot, let state):
                do { try await effects.recordPressWhileOpen(slot: slot) } catch {
                    logger.error(
                        "could not record the press", metadata: ["order.slot": "\(slot)", "error": "\(error.message)"])
                }
                logger.info(
                    "press for a slot whose order is still open: recorded, not sent",
                    metadata: ["order.slot": "\(slot)", "order.status": "\(state ?? "placed")"])
            case .order(let slot, let fromSensor):
                do {
                    let acceptance = try await effects.accept(slot: slot, fromSensor: fromSensor)
                    policy.orderAccepted(slot: slot, at: now)
                    actions =
                        PressMeaning.accepted(
                            acceptance, slot: slot, fromSensor: fromSensor, button: config.button(forInput: press.input)
                        )
                        + actions
                } catch {
                    logger.warning("press refused", metadata: ["order.slot": "\(slot)", "error": "\(error.message)"])
                    actions = PressMeaning.refused(error) + actions
                }
            case .reportSlotStatus(let slot, let report):
                await effects.reportSlotStatus(slot: slot, report: report)
            case .confirmRepairing:
                // The owner-change gesture is a factory reset: the next owner gets no queued press of this one.
                answer = await effects.factoryReset().map { _ in
                    "pairing forgotten, queued presses wiped; \(pairingAgain)"
                }
            case .openPairingWindow:
                answer = .success(await effects.openPairingWindow())
            }
        }
        if case .failure(let error) = answer, case .order(let slot) = decision, error.code == .accessDenied {
            logger.warning("press refused", metadata: ["order.slot": "\(slot)", "error": "\(error.message)"])
        }
        return answer
    }

    /// The facts `needs` names, for the slot of `decision`, each asked once: the level sensor's latch; the slot's
    /// open order, re-checked with DRS (at most once a minute); whether `Subscriptions` lets it order (asked only
    /// when the press would order: not latched, no open order).
    private func gather(_ needs: PressMeaning.Needs, for decision: PressPolicy<C.Instant>.Decision) async
        -> PressMeaning.Facts
    {
        let slot: String
        switch decision {
        case .order(let orderSlot), .orderFromSensor(let orderSlot): slot = orderSlot
        default: return PressMeaning.Facts()
        }
        var facts = PressMeaning.Facts()
        if needs.sensorLatch { facts.sensorLatched = await effects.sensorLatched(slot: slot) }
        if needs.openOrder { facts.openOrder = await effects.openOrder(slot: slot) }
        if needs.subscription, !facts.sensorLatched, facts.openOrder == nil {
            facts.subscribed = await effects.allowsPress(slot: slot)
        }
        return facts
    }

    /// How the device pairs again, for the answers to a confirmed re-pairing.
    private var pairingAgain: String {
        switch config.pairingMode {
        case .companion: "the device is in pairing mode (pairing window open)"
        case .code: "code-based linking starts again (replenish-agent status shows the code)"
        }
    }
}

/// Everything a press does outside `PressHandler`: the facts it asks for and the actions it carries out, one
/// method each. The daemon's are `DaemonPressEffects`; the handler's tests use a double that records the calls.
protocol PressEffects: Sendable {
    /// A long press offered to the Wi-Fi setup first: its answer when it took the press (no network), else nil.
    func wifiSetupLongPress() async -> String?
    /// Whether the device is paired (asked for a long press only: an order's pairing is the outbox's to check).
    func isPaired() async -> Bool
    /// A level sensor of `slot` ordered and no refill has been seen since.
    func sensorLatched(slot: String) async -> Bool
    /// The slot's order if it is still open at DRS, as re-checked now (at most once a minute); nil when there is
    /// none, it is final, or DRS could not be asked (the press is then taken as an order).
    func openOrder(slot: String) async -> PressMeaning.OpenOrder?
    /// Whether `Subscriptions` lets the slot order.
    func allowsPress(slot: String) async -> Bool
    /// The press, durably in the outbox.
    func accept(slot: String, fromSensor: Bool) async throws(AgentError) -> OrderBook.Acceptance
    func recordRefill(slot: String) async throws(AgentError)
    func recordPressWhileOpen(slot: String) async throws(AgentError)
    func reportSlotStatus(slot: String, report: SlotStatusReport) async
    /// The owner-change gesture's work (`FactoryReset`: the one deregistration path, then the wipe).
    func factoryReset() async -> Result<String, AgentError>
    /// Opens the pairing window, or in code mode skips the linking's wait; returns what to tell the customer.
    func openPairingWindow() async -> String
    /// What the LED shows because of a press (`Lights` follows it).
    func signal(_ signal: PressMeaning.Signal)
}

/// The daemon's press effects: the outbox and its delivery loop, the tokens, the order follow-up, the
/// subscriptions, the duties, the pairing entry and the reset.
struct DaemonPressEffects<C: Clock>: PressEffects where C.Duration == Duration {
    let orders: DeliveryLoop<C>
    let tokens: TokenManager<C>
    let tracker: OrderTracker<C>
    let subscriptions: Subscriptions<C>
    let duties: Duties<C>
    let signals: Broadcast<PressMeaning.Signal>
    let openWindow: @Sendable () async -> String
    let reset: @Sendable () async -> Result<String, AgentError>
    /// The Wi-Fi setup's long press (nil: `wifiSetup` is off).
    var wifiSetup: (@Sendable () async -> String?)? = nil

    func wifiSetupLongPress() async -> String? { await wifiSetup?() }
    func isPaired() async -> Bool { await tokens.isPaired }
    func sensorLatched(slot: String) async -> Bool { await orders.book.sensorOrderedWhileLow(slot) }
    func openOrder(slot: String) async -> PressMeaning.OpenOrder? { await tracker.recheck(slot: slot) }
    func allowsPress(slot: String) async -> Bool { await subscriptions.allowsPress(slot: slot) }
    func accept(slot: String, fromSensor: Bool) async throws(AgentError) -> OrderBook.Acceptance {
        try await orders.accept(slot: slot, fromSensor: fromSensor)
    }
    func recordRefill(slot: String) async throws(AgentError) { try await orders.book.recordRefill(slot: slot) }
    func recordPressWhileOpen(slot: String) async throws(AgentError) {
        try await orders.book.recordPressWhileOpen(slot: slot)
    }
    func reportSlotStatus(slot: String, report: SlotStatusReport) async {
        await duties.reportSlotStatus(slot: slot, report: report)
    }
    func factoryReset() async -> Result<String, AgentError> { await reset() }
    func openPairingWindow() async -> String { await openWindow() }
    func signal(_ signal: PressMeaning.Signal) { signals.publish(signal) }
}

extension PressEffects {
    /// No Wi-Fi setup: a long press keeps its meaning.
    func wifiSetupLongPress() async -> String? { nil }
}
