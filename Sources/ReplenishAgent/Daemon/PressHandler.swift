import Logging

/// Carries out what a recognised press means (`PressPolicy`): orders through the outbox, cooldown
/// acknowledgements, re-pairing from a long press, slot-status reports from a level sensor. Its answer goes
/// back to whoever caused the press (the control socket's `press`).
actor PressHandler<C: Clock> where C.Duration == Duration {
    private let config: AgentConfig
    private let orders: OrderService<C>
    private let tokens: TokenManager<C>
    private let duties: Duties<C>
    private let subscriptions: Subscriptions<C>
    private let lights: Lights<C>
    private let clock: C
    private let wallTime: @Sendable () -> Double
    private let logger: Logger
    private var policy = PressPolicy<C.Instant>()
    /// Opens the pairing window, or in code mode skips the linking's wait (a long press on an unpaired
    /// device); returns what to tell the customer.
    private let openPairingWindow: @Sendable () async -> String
    /// The owner-change gesture's work (`FactoryReset`: the one deregistration path, then the wipe).
    private let factoryReset: @Sendable () async -> Result<String, AgentError>
    /// Asks DRS about a slot's open order when its button is pressed again (`OrderFollowUpService.recheck`).
    private let followUp: OrderFollowUpService<C>?

    init(
        config: AgentConfig, orders: OrderService<C>, tokens: TokenManager<C>, duties: Duties<C>,
        subscriptions: Subscriptions<C>,
        lights: Lights<C>, clock: C, wallTime: @escaping @Sendable () -> Double, logger: Logger,
        openPairingWindow: @escaping @Sendable () async -> String = { "pairing window open" },
        factoryReset: @escaping @Sendable () async -> Result<String, AgentError>,
        followUp: OrderFollowUpService<C>? = nil
    ) {
        self.followUp = followUp
        self.openPairingWindow = openPairingWindow
        self.factoryReset = factoryReset
        self.config = config
        self.orders = orders
        self.tokens = tokens
        self.duties = duties
        self.subscriptions = subscriptions
        self.lights = lights
        self.clock = clock
        self.wallTime = wallTime
        self.logger = logger
    }

    func handle(_ press: ButtonPress) async -> Result<String, AgentError> {
        let now = clock.now
        let decision = policy.decide(
            press.kind, slot: config.slot(forInput: press.input),
            cooldown: config.cooldown(forInput: press.input), paired: await tokens.isPaired, at: now)
        await lights.update { [armed = policy.isRepairingArmed(at: now)] in $0.repairingArmed = armed }
        if case .orderFromSensor(let slot) = decision, await orders.sensorOrderedWhileLow(slot) {
            logger.info(
                "level sensor low again before a refill was seen: no new order", metadata: ["order.slot": "\(slot)"])
            return .success("slot \(slot) was already ordered while low; waiting for a refill")
        }
        switch decision {
        case .sensorRefilled(let slot):
            do {
                try await orders.recordRefill(slot: slot)
                logger.info("level sensor: refill seen; the next low orders again", metadata: ["order.slot": "\(slot)"])
                return .success("slot \(slot) refilled")
            } catch {
                // Not saved: the latch stays, and the sensor will not order at the next low. The customer's
                // button still orders; the log says why the sensor did not.
                logger.error(
                    "could not record the refill", metadata: ["order.slot": "\(slot)", "error": "\(error.message)"])
                return .failure(error)
            }
        case .order(let slot), .orderFromSensor(let slot):
            if case .order = decision, let answer = await alreadyOrdered(slot: slot) { return answer }
            do {
                let fromSensor = if case .orderFromSensor = decision { true } else { false }
                let acceptance = try await accept(slot: slot, fromSensor: fromSensor)
                policy.orderAccepted(slot: slot, at: now)
                await reportConsumption(slot: slot, input: press.input, fromSensor: fromSensor, acceptance: acceptance)
                switch acceptance {
                case .queued: return .success("order for slot \(slot) queued")
                case .coalesced: return .success("an order for slot \(slot) is already pending; press recorded")
                }
            } catch {
                logger.warning("press refused", metadata: ["order.slot": "\(slot)", "error": "\(error.message)"])
                await lights.acknowledge()
                return .failure(error)
            }
        case .acknowledgeOnly(let reason):
            await lights.acknowledge()
            return .success(reason)
        case .armRepairing:
            logger.notice("long press: re-pairing armed; long-press again within 30 s to confirm, short press cancels")
            return .success("re-pairing armed: long-press again within 30 s to confirm, or short-press to cancel")
        case .cancelRepairing:
            await lights.acknowledge()
            return .success("re-pairing cancelled")
        case .confirmRepairing:
            // The owner-change gesture is a factory reset: the next owner gets no queued press of this one.
            return await factoryReset().map { _ in "pairing forgotten, queued presses wiped; \(pairingAgain)" }
        case .openPairingWindow:
            return .success(await openPairingWindow())
        case .unmapped:
            return .failure(AgentError(.invalidInput, "input \(press.input) is not mapped to a slot"))
        }
    }

    /// A button press for a slot whose last order DRS has not called shipped, delivered or cancelled: DRS is
    /// asked again (at most once a minute); while the order is still open the press is recorded on it and the
    /// LED says "already ordered" (DRS would answer `ORDER_INPROGRESS`). Nil: take the press as an order.
    private func alreadyOrdered(slot: String) async -> Result<String, AgentError>? {
        guard let followUp, await orders.openOrder(slot: slot) != nil,
            await followUp.recheck(slot: slot) == true,
            let (_, state) = await orders.openOrder(slot: slot)
        else { return nil }
        let at = wallTime()
        do { try await orders.recordPressWhileOpen(slot: slot, at: at) } catch {
            logger.error(
                "could not record the press", metadata: ["order.slot": "\(slot)", "error": "\(error.message)"])
        }
        await lights.alreadyOrdered()
        logger.info(
            "press for a slot whose order is still open: recorded, not sent",
            metadata: ["order.slot": "\(slot)", "order.status": "\(state ?? "placed")"])
        return .success(
            "slot \(slot) is already ordered (\(state ?? "placed"), not yet shipped); press recorded, no new order")
    }

    /// What an accepted press says of the slot's contents (its consumption, and a level sensor's latch, were
    /// written with the press, `OrderService.accept`): slot status is reported to DRS for a sensor, or for a
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

    /// The outbox takes the press, if `Subscriptions` lets the slot order (it re-checks a slot recorded
    /// unsubscribed, at most once a minute, so the button works as soon as the customer subscribes).
    private func accept(slot: String, fromSensor: Bool) async throws(AgentError) -> Outbox.Acceptance {
        guard await subscriptions.allowsPress(slot: slot) else {
            throw AgentError(.accessDenied, "slot \(slot) is not subscribed")
        }
        return try await orders.accept(slot: slot, fromSensor: fromSensor)
    }

    /// How the device pairs again, for the answers to a confirmed re-pairing.
    private var pairingAgain: String {
        switch config.pairingMode {
        case .companion: "the device is in pairing mode (pairing window open)"
        case .code: "code-based linking starts again (replenish-agent status shows the code)"
        }
    }
}
