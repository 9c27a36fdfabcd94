import Logging

/// Carries out what a recognised press means: `PressPolicy` decides (cooldown, re-pairing from a long press),
/// `PressMeaning` says what follows from that and the facts this gathers (orders through the outbox, a press
/// recorded on an open order, a refill, the LED's signals, which it publishes for `Lights`), and this carries
/// it out, with slot-status reports for a level sensor. Its answer goes back to whoever caused the press (the
/// control socket's `press`).
actor PressHandler<C: Clock> where C.Duration == Duration {
    private let config: AgentConfig
    private let orders: Orders<C>
    private let tokens: TokenManager<C>
    private let duties: Duties<C>
    private let subscriptions: Subscriptions<C>
    /// What the LED shows because of a press (`Lights` follows it).
    nonisolated let signals = Broadcast<PressMeaning.Signal>()
    private let clock: C
    private let wallTime: @Sendable () -> Double
    private let logger: Logger
    private var policy = PressPolicy<C.Instant>()
    /// Opens the pairing window, or in code mode skips the linking's wait (a long press on an unpaired
    /// device); returns what to tell the customer.
    private let openPairingWindow: @Sendable () async -> String
    /// The owner-change gesture's work (`FactoryReset`: the one deregistration path, then the wipe).
    private let factoryReset: @Sendable () async -> Result<String, AgentError>
    /// Asks DRS about a slot's open order when its button is pressed again (`OrderTracker.recheck`).
    private let tracker: OrderTracker<C>

    init(
        config: AgentConfig, orders: Orders<C>, tokens: TokenManager<C>, duties: Duties<C>,
        subscriptions: Subscriptions<C>,
        clock: C, wallTime: @escaping @Sendable () -> Double, logger: Logger,
        openPairingWindow: @escaping @Sendable () async -> String,
        factoryReset: @escaping @Sendable () async -> Result<String, AgentError>,
        tracker: OrderTracker<C>
    ) {
        self.tracker = tracker
        self.openPairingWindow = openPairingWindow
        self.factoryReset = factoryReset
        self.config = config
        self.orders = orders
        self.tokens = tokens
        self.duties = duties
        self.subscriptions = subscriptions
        self.clock = clock
        self.wallTime = wallTime
        self.logger = logger
    }

    func handle(_ press: ButtonPress) async -> Result<String, AgentError> {
        let now = clock.now
        let decision = policy.decide(
            press.kind, slot: config.slot(forInput: press.input),
            cooldown: config.cooldown(forInput: press.input), paired: await tokens.isPaired, at: now)
        signals.publish(.repairingArmed(policy.isRepairingArmed(at: now)))
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
            case .signal(let signal): signals.publish(signal)
            case .recordRefill(let slot):
                do {
                    try await orders.recordRefill(slot: slot)
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
                do { try await orders.recordPressWhileOpen(slot: slot, at: wallTime()) } catch {
                    logger.error(
                        "could not record the press", metadata: ["order.slot": "\(slot)", "error": "\(error.message)"])
                }
                logger.info(
                    "press for a slot whose order is still open: recorded, not sent",
                    metadata: ["order.slot": "\(slot)", "order.status": "\(state ?? "placed")"])
            case .order(let slot, let fromSensor):
                do {
                    let acceptance = try await orders.accept(slot: slot, fromSensor: fromSensor)
                    policy.orderAccepted(slot: slot, at: now)
                    await reportConsumption(
                        slot: slot, input: press.input, fromSensor: fromSensor, acceptance: acceptance)
                    answer = .success(PressMeaning.accepted(acceptance, slot: slot))
                } catch {
                    logger.warning("press refused", metadata: ["order.slot": "\(slot)", "error": "\(error.message)"])
                    actions = PressMeaning.refused(error) + actions
                }
            case .confirmRepairing:
                // The owner-change gesture is a factory reset: the next owner gets no queued press of this one.
                answer = await factoryReset().map { _ in "pairing forgotten, queued presses wiped; \(pairingAgain)" }
            case .openPairingWindow:
                answer = .success(await openPairingWindow())
            }
        }
        if case .failure(let error) = answer, case .order(let slot) = decision, error.code == .accessDenied {
            logger.warning("press refused", metadata: ["order.slot": "\(slot)", "error": "\(error.message)"])
        }
        return answer
    }

    /// The facts `needs` names, for the slot of `decision`: the level sensor's latch; the slot's open order,
    /// re-checked with DRS (at most once a minute, `OrderTracker.recheck`); whether `Subscriptions` lets
    /// it order (asked only when the press would order: not latched, no open order).
    private func gather(_ needs: PressMeaning.Needs, for decision: PressPolicy<C.Instant>.Decision) async
        -> PressMeaning.Facts
    {
        let slot: String
        switch decision {
        case .order(let orderSlot), .orderFromSensor(let orderSlot): slot = orderSlot
        default: return PressMeaning.Facts()
        }
        var facts = PressMeaning.Facts()
        if needs.sensorLatch { facts.sensorLatched = await orders.sensorOrderedWhileLow(slot) }
        if needs.openOrder, await orders.openOrder(slot: slot) != nil,
            await tracker.recheck(slot: slot) == true, let (_, state) = await orders.openOrder(slot: slot)
        {
            facts.openOrder = PressMeaning.OpenOrder(state: state)
        }
        if needs.subscription, !facts.sensorLatched, facts.openOrder == nil {
            facts.subscribed = await subscriptions.allowsPress(slot: slot)
        }
        return facts
    }

    /// What an accepted press says of the slot's contents (its consumption, and a level sensor's latch, were
    /// written with the press, `Orders.accept`): slot status is reported to DRS for a sensor, or for a
    /// button whose slot has configured quantities (`ConsumptionRate`).
    private func reportConsumption(slot: String, input: String, fromSensor: Bool, acceptance: Outbox.Acceptance)
        async
    {
        guard acceptance == .queued || fromSensor else { return }
        let button = config.button(forInput: input)
        guard fromSensor || button?.quantity != nil,
            let report = ConsumptionRate.report(
                history: await orders.consumedAt(slot), quantity: button?.quantity,
                remainingWhenLow: button?.remainingWhenLow ?? 0)
        else { return }
        await duties.reportSlotStatus(slot: slot, report: report)
    }

    /// How the device pairs again, for the answers to a confirmed re-pairing.
    private var pairingAgain: String {
        switch config.pairingMode {
        case .companion: "the device is in pairing mode (pairing window open)"
        case .code: "code-based linking starts again (replenish-agent status shows the code)"
        }
    }
}
