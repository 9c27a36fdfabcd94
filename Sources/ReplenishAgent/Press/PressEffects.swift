/// Everything a press does outside `PressHandler`: the facts it asks for and the actions it carries out, one
/// method each. The daemon's are `DaemonPressEffects`; the handler's tests use a double that records the calls.
protocol PressEffects: Sendable {
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
    let orders: Orders<C>
    let tokens: TokenManager<C>
    let tracker: OrderTracker<C>
    let subscriptions: Subscriptions<C>
    let duties: Duties<C>
    let signals: Broadcast<PressMeaning.Signal>
    let openWindow: @Sendable () async -> String
    let reset: @Sendable () async -> Result<String, AgentError>

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
