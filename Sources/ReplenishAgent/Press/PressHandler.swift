import Logging

/// Carries out what a recognised press means: `PressPolicy` decides (cooldown, re-pairing from a long press), this
/// asks the facts an order needs of their owners, `PressMeaning` says what follows, and this carries the actions
/// out: on the order side with the owners themselves (the outbox, a press recorded on an open order, a refill), the
/// rest through `PressEffects` (a slot-status report, the LED's signals, the pairing). Its answer goes back to
/// whoever caused the press (the control socket's `press`).
final actor PressHandler<C: Clock> where C.Duration == Duration {
    private let config: AgentConfig
    private let outbox: any PressOutbox
    private let book: any PressBook
    private let tracker: any OpenOrderCheck
    private let subscriptions: any SubscriptionCheck
    private let effects: any PressEffects
    private let clock: C
    private let logger: Logger
    private var policy = PressPolicy<C.Instant>()

    /// In the daemon each owner is the actor itself (`DeliveryLoop`, `OrderBook`, `OrderTracker`, `Subscriptions`);
    /// `PressHandlerTests` pass one recording double for all.
    init(
        config: AgentConfig, outbox: any PressOutbox, book: any PressBook, tracker: any OpenOrderCheck,
        subscriptions: any SubscriptionCheck, effects: any PressEffects, clock: C, logger: Logger
    ) {
        (self.config, self.outbox, self.book, self.tracker) = (config, outbox, book, tracker)
        (self.subscriptions, self.effects, self.clock, self.logger) = (subscriptions, effects, clock, logger)
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
        let facts = await facts(for: decision)
        var answer: Result<String, AgentError> = .failure(AgentError(.invalidInput, "the press was not answered"))
        var actions = PressMeaning.actions(for: decision, facts: facts, input: press.input)
        while !actions.isEmpty {
            switch actions.removeFirst() {
            case .answer(let text): answer = .success(text)
            case .refuse(let code, let message): answer = .failure(AgentError(code, message))
            case .signal(let signal): effects.signal(signal)
            case .recordRefill(let slot):
                do {
                    try await book.recordRefill(slot: slot)
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
                do { try await book.recordPressWhileOpen(slot: slot) } catch {
                    logger.error(
                        "could not record the press", metadata: ["order.slot": "\(slot)", "error": "\(error.message)"])
                }
                logger.info(
                    "press for a slot whose order is still open: recorded, not sent",
                    metadata: ["order.slot": "\(slot)", "order.status": "\(state ?? "placed")"])
            case .order(let slot, let fromSensor):
                do {
                    let acceptance = try await outbox.accept(slot: slot, fromSensor: fromSensor)
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

    /// The facts an order needs, each asked once: a button's open order, re-checked with DRS (at most once a minute);
    /// a level sensor's latch; then, only when the press would order, whether `Subscriptions` lets it.
    private func facts(for decision: PressMeaning.Decision) async -> PressMeaning.Facts {
        var facts = PressMeaning.Facts()
        switch decision {
        case .order(let slot):
            facts.openOrder = await tracker.recheck(slot: slot)
            if facts.openOrder == nil { facts.subscribed = await subscriptions.allowsPress(slot: slot) }
        case .orderFromSensor(let slot):
            facts.sensorLatched = await book.sensorOrderedWhileLow(slot)
            if facts.sensorLatched {
                logger.info(
                    "level sensor low again before a refill was seen: no new order",
                    metadata: ["order.slot": "\(slot)"])
            } else {
                facts.subscribed = await subscriptions.allowsPress(slot: slot)
            }
        case .armRepairing:
            logger.notice("long press: re-pairing armed; long-press again within 30 s to confirm, short press cancels")
        default: break
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

/// The outbox, as a press gives it an order: `DeliveryLoop`.
protocol PressOutbox: Sendable {
    /// The press, durably in the outbox.
    func accept(slot: String, fromSensor: Bool) async throws(AgentError) -> OrderBook.Acceptance
}

/// The outbox's book, as a press asks and records what is no order: `OrderBook`.
protocol PressBook: Sendable {
    /// A level sensor of `slot` ordered and no refill has been seen since.
    func sensorOrderedWhileLow(_ slot: String) async -> Bool
    func recordRefill(slot: String) async throws(AgentError)
    func recordPressWhileOpen(slot: String) async throws(AgentError)
}

/// The order follow-up, as a press asks about the slot's open order: `OrderTracker`.
protocol OpenOrderCheck: Sendable {
    /// The slot's order if it is still open at DRS, as re-checked now (at most once a minute); nil when there is
    /// none, it is final, or DRS could not be asked (the press is then taken as an order).
    func recheck(slot: String) async -> PressMeaning.OpenOrder?
}

/// The subscriptions, as a press asks whether its slot may order: `Subscriptions`.
protocol SubscriptionCheck: Sendable {
    /// Whether a press for `slot` may order: not recorded unsubscribed, or found subscribed by a re-check.
    func allowsPress(slot: String) async -> Bool
}

extension DeliveryLoop: PressOutbox {}
extension OrderBook: PressBook {}
extension OrderTracker: OpenOrderCheck {}
extension Subscriptions: SubscriptionCheck {}

/// What a press does besides the order side: the pairing it asks about for a long press, the slot-status report,
/// the reset, the pairing window, the Wi-Fi setup and the LED's signals, one method each. The daemon's are
/// `DaemonPressEffects`; the handler's tests use a double that records the calls.
protocol PressEffects: Sendable {
    /// A long press offered to the Wi-Fi setup first: its answer when it took the press (no network), else nil.
    func wifiSetupLongPress() async -> String?
    /// Whether the device is paired (asked for a long press only: an order's pairing is the outbox's to check).
    func isPaired() async -> Bool
    func reportSlotStatus(slot: String, report: SlotStatusReport) async
    /// The owner-change gesture's work (`FactoryReset`: the one deregistration path, then the wipe).
    func factoryReset() async -> Result<String, AgentError>
    /// Opens the pairing window, or in code mode skips the linking's wait; returns what to tell the customer.
    func openPairingWindow() async -> String
    /// What the LED shows because of a press (`Lights` follows it).
    func signal(_ signal: PressMeaning.Signal)
}

/// The daemon's press effects: the tokens, the duties, the pairing entry, the reset and the LED's signals.
struct DaemonPressEffects<C: Clock>: PressEffects where C.Duration == Duration {
    let tokens: TokenManager<C>
    let duties: Duties<C>
    let signals: Broadcast<PressMeaning.Signal>
    let openWindow: @Sendable () async -> String
    let reset: @Sendable () async -> Result<String, AgentError>
    /// The Wi-Fi setup's long press (nil: `wifiSetup` is off).
    var wifiSetup: (@Sendable () async -> String?)? = nil

    func wifiSetupLongPress() async -> String? { await wifiSetup?() }
    func isPaired() async -> Bool { await tokens.isPaired }
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
