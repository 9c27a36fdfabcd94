import Logging

/// What the follow-up reads and records of the slots' orders (`OrderBook`, their one owner).
protocol FollowedOrders: Actor {
    /// The slots of `slots` whose last placed order is still followed up.
    func openOrders(of slots: [String]) -> [(slot: String, eventInstanceId: String)]
    /// The slot's order while DRS has not said it is final.
    func openOrder(slot: String) -> (eventInstanceId: String, status: String?)?
    /// `getOrderInfo` said `state` of the slot's order `id`.
    func recordFollowUp(slot: String, eventInstanceId id: String, state: String, open: Bool, at time: Double)
        async throws(AgentError)
}

extension OrderBook: FollowedOrders {}

/// Follows each slot's last placed order with `getOrderInfo` (`OrderFollowUp`'s cadence) until DRS says it is
/// shipped, delivered or cancelled, and records its state for `status`. Woken by the order stream when an
/// order is placed; asks nothing while no order is open.
final actor OrderTracker<C: Clock> where C.Duration == Duration {
    private let drs: DRSSession
    private let tokens: TokenManager<C>
    private let orders: any FollowedOrders
    private let slots: [String]
    private let phase: AgentConfig.Phase
    private let clock: C
    private let wallTime: @Sendable () -> Double
    private let logger: Logger
    private let waker = Waker()
    /// When each open order is asked about next (in memory: after a restart, one delay from the start).
    private var timeline: FollowUpTimeline<C.Instant>
    /// When each slot's open order was last asked about because of a press (`recheck`), per order.
    private var rechecks: [String: PressRecheckLimit<C.Instant, String, PressMeaning.OpenOrder?>] = [:]

    init(
        drs: DRSSession, tokens: TokenManager<C>, orders: any FollowedOrders, slots: [String],
        phase: AgentConfig.Phase,
        clock: C, wallTime: @escaping @Sendable () -> Double, random: RandomSource = .system, logger: Logger
    ) {
        self.drs = drs
        self.tokens = tokens
        self.orders = orders
        self.slots = slots
        self.phase = phase
        self.clock = clock
        self.wallTime = wallTime
        timeline = FollowUpTimeline(phase: phase, random: random)
        self.logger = logger
    }

    func run() async {
        while !Task.isCancelled { await waker.wait(for: await step(), clock: clock) }
    }

    /// Carries out the timeline's actions until it says wait; returns the wait.
    func step() async -> LoopStep<C.Instant> {
        var worked = false
        while !Task.isCancelled {
            let paired = await tokens.isPaired
            let open = await orders.openOrders(of: slots)
            switch timeline.next(paired: paired, open: open.map(\.slot), at: clock.now) {
            case .waitForChange:
                return .wait(until: nil, worked: worked)
            case .wait(let until):
                return .wait(until: until, worked: worked)
            case .check(let slot):
                guard let id = open.first(where: { $0.slot == slot })?.eventInstanceId else { continue }
                await check(slot: slot, eventInstanceId: id)
                worked = true
            }
        }
        return .wait(until: nil, worked: worked)
    }

    /// An order was placed: look at the open orders again.
    func wake() { waker.ring() }

    /// A press for a slot whose order is still open: DRS may have shipped it since the last question, so ask now,
    /// at most once a minute per slot. Returns the order, with DRS's word for its state, when it is still open
    /// (now, or as last asked within the minute); nil when it is final, there is none, or DRS could not be asked
    /// (now or within the minute): the press is then taken as an order (DRS answers `ORDER_INPROGRESS` if it is
    /// still out), never dropped on a guess.
    func recheck(slot: String) async -> PressMeaning.OpenOrder? {
        guard let (id, _) = await orders.openOrder(slot: slot) else { return nil }
        // The spacing is per order: a newer order of the slot is asked about at its first press.
        if case .askedRecently(let open) = rechecks[slot, default: .init()].decide(id, at: clock.now) {
            return open ?? nil
        }
        guard let (state, open) = await check(slot: slot, eventInstanceId: id) else { return nil }
        let answer = open ? PressMeaning.OpenOrder(state: state) : nil
        rechecks[slot]?.record(answer)
        return answer
    }

    /// Asks DRS about one order and records the answer (its state, and whether it is still open); nil when it
    /// could not (retried with backoff).
    @discardableResult
    private func check(slot: String, eventInstanceId id: String) async -> (state: String, open: Bool)? {
        do throws(AgentError) {
            let call = DRSClient.Call.orderInfo(eventInstanceId: id)
            let answer = try await drs.send(call)
            let state: String
            switch answer.status {
            case 200: state = try OrderFollowUp.status(fromAnswer: answer.body, slot: slot)
            // DRS no longer knows the order: nothing more to ask.
            case 404: state = "Unknown"
            default:
                try DRSSession.requireSuccess(answer, of: call)
                throw AgentError(.server, "getOrderInfo answered \(answer.status)")
            }
            let open = answer.status == 200 && !OrderFollowUp.isFinal(state)
            let now = wallTime()
            try await orders.recordFollowUp(slot: slot, eventInstanceId: id, state: state, open: open, at: now)
            timeline.answered(slot: slot, open: open, at: clock.now)
            logger.info(
                "order followed up",
                metadata: ["order.slot": "\(slot)", "order.status": "\(state)", "order.open": "\(open)"])
            return (state, open)
        } catch {
            let delay = timeline.failed(slot: slot, error: error, at: clock.now)
            logger.warning(
                "order follow-up failed; will retry",
                metadata: [
                    "order.slot": "\(slot)", "error": "\(error.message)",
                    "order.retryIn": "\(delay.components.seconds)s",
                ])
            return nil
        }
    }
}

extension OrderTracker {
    /// A placed order (the order stream's `.acknowledged`) is followed from now on.
    nonisolated func follow(orders: AsyncStream<OrderUpdate>) async {
        for await update in orders {
            if case .acknowledged = update.event { await wake() }
        }
    }
}

extension OrderTracker {
    /// The order follow-up as the daemon runs it, following the outbox's updates (a delivered order).
    struct Part: DaemonPart {
        let tracker: OrderTracker
        let orders: AsyncStream<OrderUpdate>
        var description: String { "order follow-up" }

        func follow() async { await tracker.follow(orders: orders) }
        func work() async { await tracker.run() }
    }
}
