import Logging

/// The owner of the order facts: the outbox (presses still to send), each slot's orders, consumption and level
/// latch, and the order history, all in `outbox.json`. Every change is one `commit`, written on the outbox's
/// disk lane before anyone sees it; `DeliveryLoop` (the delivery loop), `OrderTracker`, the press and the owner
/// commands change the facts only through here, and read only what they need.
final actor OrderBook {
    /// `outbox.json`, on the outbox's own lane (`StateStore.outbox`).
    private let store: StateStore<Outbox>
    /// What the facts are stamped with: this run and boot, the wall clock and whether it is synchronised, the
    /// time since the boot began.
    nonisolated let stamps: OrderStamps
    private let logger: Logger
    private var outbox: Outbox
    /// The entries whose press's write also marked their call "sent, answer unknown", each as it was before.
    private var marks = AcceptMarks()
    /// One change at a time across its write (`DiskLane`, off the event loop).
    private let turns = WriteTurns()
    /// Whether the file holds what memory holds, and when a failed write is tried again.
    private var writes: WriteHealth
    /// Every order event with the counts the followers show; published, never awaited.
    nonisolated let updates = Broadcast<OrderUpdate>()

    init(
        stateDirectory: String, run: AgentRun, wallTime: @escaping @Sendable () -> Double,
        clockSynchronized: @escaping @Sendable () -> Bool = { WallClock.isSynchronized() },
        sinceBoot: @escaping @Sendable () -> Double = { WallClock.sinceBoot() }, random: RandomSource = .system,
        logger: Logger, loadingOn lane: borrowing DiskLane.Context
    ) throws(AgentError) {
        store = .outbox(stateDirectory: stateDirectory)
        stamps = OrderStamps(
            run: run, wallTime: wallTime, clockSynchronized: clockSynchronized, sinceBoot: sinceBoot)
        writes = WriteHealth(random: random)
        self.logger = logger
        outbox = try Self.movingLegacyOrders(
            into: try store.load(on: lane) { logger.error("\($0)") } ?? Outbox(), store: store,
            stateDirectory: stateDirectory, logger: logger, on: lane)
    }

    /// Earlier builds kept each slot's orders and the order history in `status.json`: the first start of
    /// this build moves them here (written now, at the start, before the event loop serves), and `SubscriptionBook`
    /// leaves them out of its next write.
    static func movingLegacyOrders(
        into loaded: Outbox, store: StateStore<Outbox>, stateDirectory: String, logger: Logger,
        on lane: borrowing DiskLane.Context
    ) throws(AgentError) -> Outbox {
        var outbox = loaded
        guard outbox.adoptLegacyOrders(stateDirectory: stateDirectory, on: lane) else { return loaded }
        try store.saveNow(outbox, on: lane)
        logger.notice("the slots' orders and the order history moved from status.json to outbox.json")
        return outbox
    }

    static func path(stateDirectory: String) -> String { POSIX.join(stateDirectory, "outbox.json") }

    var snapshot: Outbox { outbox }

    // MARK: Accepting a press

    /// What the outbox made of a press: a new entry or one counted on the pending entry, and the slot's
    /// consumption after it (for the slot-status report).
    struct Acceptance: Sendable {
        var kind: Outbox.Acceptance
        var consumedAt: [Double]
        /// The press replaced an entry of an earlier boot that waited for the wall clock.
        var replacedWaiting: Bool
    }

    /// Whether the call that follows the press may be marked "sent, answer unknown" in the press's own write:
    /// `DeliveryLoop` knows whether it leaves at once (a token at hand, the slot not backing off), for a new entry and
    /// for a press counted on the pending one. The entry as it was before the mark is kept here (`marks`), for
    /// the try that takes it (`markSending`) or gives it back (`unmarkAccepted`).
    struct MarkNow: Sendable {
        var ifQueued = false
        var ifCoalesced = false
    }

    /// Writes the press for `slot` to the outbox: durable when this returns; nothing is kept when the write fails.
    /// `fromSensor`: a level sensor's low, whose order latches the slot until a refill. The press's consumption
    /// (and the latch) travel in the same write as the press.
    func accept(slot: String, fromSensor: Bool, pairingId: String?, markNow: MarkNow) async throws(AgentError)
        -> Acceptance
    {
        await turns.take()
        defer { turns.release() }
        var next = outbox
        let (run, synchronized, now) = (stamps.run, stamps.clockSynchronized(), stamps.wallTime())
        // A press of this boot does not wait behind an earlier boot's call whose age cannot be told yet.
        let replacesWaiting =
            outbox.entry(for: slot).map { Outbox.waitsForClock($0, run: run, clockSynchronized: synchronized) } ?? false
        let kind = next.accept(
            slot: slot, at: now, pairingId: pairingId, replacesWaiting: replacesWaiting, fromSensor: fromSensor)
        var markedFrom: Outbox.Entry?
        // A press counted on an entry whose mark is still to be tried, or on one already marked (a call out, or
        // unanswered, or of an earlier boot waiting for the clock), leaves that mark as it is: only a mark this
        // write adds is remembered, to be taken back.
        if kind == .queued ? markNow.ifQueued : markNow.ifCoalesced && !marks.has(slot),
            let entry = next.entry(for: slot), !entry.isParked, entry.unansweredSince == nil
        {
            next.markSending(slot: slot, at: now, run: run, uptime: stamps.sinceBoot())
            markedFrom = entry
        }
        // Durable before the answer, and before the delivery loop can see it (and send it). A press not written is
        // refused, and its caller says why (`PressHandler`): nothing of it is kept.
        try await store.save(next)
        outbox = next
        if writes.succeeded() { logger.notice("the outbox is written now") }
        if kind == .queued { marks.forget(slot) }
        if let markedFrom { marks.remember(slot, before: markedFrom) }
        if replacesWaiting {
            logger.notice(
                "this press replaces an order of an earlier boot that waited for the wall clock",
                metadata: ["order.slot": "\(slot)"])
        }
        logger.info("press accepted", metadata: ["order.slot": "\(slot)", "order.acceptance": "\(kind)"])
        publish(.queued(slot: slot))
        return Acceptance(
            kind: kind, consumedAt: outbox.slots[slot]?.consumedAt ?? [], replacedWaiting: replacesWaiting)
    }

    // MARK: Reading

    /// Whether a level sensor of `slot` ordered and no refill was seen since.
    func sensorOrderedWhileLow(_ slot: String) -> Bool { outbox.slots[slot]?.sensorOrderedWhileLow == true }

    /// The tries of the slot's pending entry so far (nil: none pending).
    func attempts(slot: String) -> Int? { outbox.entry(for: slot)?.attempts }

    /// The slot's order while DRS has not said it is final.
    func openOrder(slot: String) -> (eventInstanceId: String, status: String?)? { outbox.openOrder(slot: slot) }

    /// The slots whose last placed order is still followed up.
    func openOrders(of slots: [String]) -> [(slot: String, eventInstanceId: String)] {
        slots.compactMap { slot in outbox.openOrder(slot: slot).map { (slot, $0.eventInstanceId) } }
    }

    /// The pending entries as one look of the delivery loop judges them (`DeliveryMachine.next`): each slot,
    /// whether it waits for the wall clock, and why it must not be sent if it must not (`Outbox.parkReason`;
    /// `pairingId`: the pairing's tag when paired, `.none` unpaired). Reads only; nothing is copied but these.
    func look(configuredSlots: Set<String>, pairingId: String??) -> [PendingSlot] {
        let (now, synchronized, sinceBoot, run) =
            (stamps.wallTime(), stamps.clockSynchronized(), stamps.sinceBoot(), stamps.run)
        return outbox.pending.map { entry in
            PendingSlot(
                slot: entry.slot, waitsForClock: Outbox.waitsForClock(entry, run: run, clockSynchronized: synchronized),
                parkReason: Outbox.parkReason(
                    entry, now: now, configuredSlots: configuredSlots, pairingId: pairingId, run: run,
                    clockSynchronized: synchronized, sinceBoot: sinceBoot))
        }
    }

    // MARK: Changing

    /// Applies `change` to the outbox and writes the result on the disk lane, then publishes `event` (if any).
    /// A change that changes nothing writes nothing, unless the file is behind (a failed write). A failed write
    /// (disk full) keeps the change in memory, so the agent acts on what really happened, and throws with the
    /// backoff after which to write again (`retryAfter`): the file still holds the older state, so an entry
    /// completed in memory is still there with its "sent, answer unknown" mark, and a restart resends it at most
    /// within a day, when DRS de-duplicates it.
    @discardableResult
    func commit<T: Sendable>(_ event: OrderEvent? = nil, _ change: @Sendable (inout Outbox) -> T)
        async throws(AgentError) -> T
    {
        await turns.take()
        defer { turns.release() }
        var next = outbox
        let result = change(&next)
        try await write(next, then: event)
        return result
    }

    /// `commit`'s write, the same for every change (not generic, so each caller's `commit` is small): `next` made
    /// current, written if it differs or the file is behind, then `event` published (if any).
    private func write(_ next: Outbox, then event: OrderEvent?) async throws(AgentError) {
        // A mark is kept only while its entry still waits to be tried with it (completed, parked or dropped, it
        // goes), whether or not the write succeeded: memory holds the change either way.
        defer { marks.keepOnlyWaiting(in: outbox) }
        if next != outbox || writes.unwritten {
            do { try await store.save(next) } catch { throw keptUnwritten(next, error) }
            outbox = next
            if writes.succeeded() { logger.notice("the outbox is written now") }
        }
        if let event { publish(event) }
    }

    /// Marks the slot's entry "sent, answer unknown" before its call leaves, stamped with this run and boot;
    /// returns the entry as it was, nil when there is none. A press whose write carried the mark already
    /// (`accept`'s `markNow`) costs no write here. `answeredBefore`: the slot's last call was answered (a
    /// rejected token), which this same write records first.
    func markSending(slot: String, answeredBefore: Bool) async throws(AgentError) -> Outbox.Entry? {
        if !answeredBefore, let before = marks.take(slot) { return before }
        let (at, uptime, run) = (stamps.wallTime(), stamps.sinceBoot(), stamps.run)
        return try await commit { outbox in
            if answeredBefore { outbox.markAnswered(slot: slot) }
            let before = outbox.entry(for: slot)
            if before != nil { outbox.markSending(slot: slot, at: at, run: run, uptime: uptime) }
            return before
        }
    }

    /// The call a press's write marked does not leave (no token to send with): the mark goes back to what it was.
    func unmarkAccepted(slot: String) async throws(AgentError) {
        guard let before = marks.take(slot) else { return }
        try await commit { $0.unmarkSending(slot: slot, previous: before) }
    }

    /// Parks entries that must not be sent (`Outbox.parkReason`): a slot not in `configuredSlots`, a call
    /// unanswered for over a day, or (`pairingId`, when paired) a press of another pairing; each logged and told.
    func parkStale(configuredSlots: Set<String>, pairingId: String??) async throws(AgentError) {
        let (now, synchronized, sinceBoot, run) =
            (stamps.wallTime(), stamps.clockSynchronized(), stamps.sinceBoot(), stamps.run)
        let parked = try await commit { next in
            next.parkStale(
                now: now, configuredSlots: configuredSlots, pairingId: pairingId, run: run,
                clockSynchronized: synchronized, sinceBoot: sinceBoot)
        }
        for (slot, reason) in parked {
            logger.error("order parked", metadata: ["order.slot": "\(slot)", "order.reason": "\(reason)"])
            publish(.parked(slot: slot, reason: reason))
        }
    }

    /// A level sensor's refill was seen: the next low orders again.
    func recordRefill(slot: String) async throws(AgentError) {
        try await commit { $0.slots[slot, default: .init()].sensorOrderedWhileLow = nil }
    }

    /// A press for a slot whose order is still open: counted on that order, not sent.
    func recordPressWhileOpen(slot: String) async throws(AgentError) {
        let now = stamps.wallTime()
        try await commit { $0.recordPressWhileOpen(slot: slot, at: now) }
    }

    /// `getOrderInfo` said `state` of the slot's order `id` (`OrderTracker`).
    func recordFollowUp(slot: String, eventInstanceId id: String, state: String, open: Bool, at time: Double)
        async throws(AgentError)
    {
        try await commit { $0.recordFollowUp(slot: slot, eventInstanceId: id, status: state, open: open, at: time) }
    }

    /// DRS cancelled the test orders of `slots` (`TestOrderCancellation`).
    func recordTestOrdersCancelled(slots: [String], at time: Double) async throws(AgentError) {
        try await commit { $0.recordTestOrdersCancelled(slots: slots, at: time) }
    }

    /// The device left the customer's account (`reason`): its queued presses go, each one still to send
    /// recorded in the history as not sent and logged; the history stays.
    func forgetAccount(reason: String) async throws(AgentError) {
        let now = stamps.wallTime()
        let dropped = try await commit { $0.forgetAccount(reason: reason, at: now) }
        for slot in dropped {
            logger.warning(
                "a queued press was dropped, never sent",
                metadata: ["order.slot": "\(slot)", "order.reason": "\(reason)"])
        }
    }

    /// Factory reset: every queued press and the history are forgotten, the file overwritten and removed.
    func wipe() async throws(AgentError) {
        await turns.take()
        defer { turns.release() }
        try await store.shred()
        outbox = Outbox()
        marks.forgetAll()
        writes.succeeded()
    }

    /// A change that happened (an answer of DRS) stays in memory when it cannot be written: the file is behind,
    /// and the error to throw says after which backoff to write again (`retryAfter`).
    private func keptUnwritten(_ next: Outbox, _ error: AgentError) -> AgentError {
        outbox = next
        let delay = writes.failed()
        logger.error(
            "could not write the outbox; nothing is sent until it is written",
            metadata: ["error": "\(error.message)", "order.retryIn": "\(delay.components.seconds)s"])
        return AgentError(
            .storage, "could not write \(store.path); the change is kept in memory and written later",
            retryAfter: delay)
    }

    private func publish(_ event: OrderEvent) {
        updates.publish(OrderUpdate(event: event, pending: outbox.pending.count, parked: outbox.parked.count))
    }

    /// Publishes an event of the delivery loop that changed no fact (a retry scheduled, no token).
    func tell(_ event: OrderEvent) { publish(event) }
}

/// What `OrderBook` stamps its facts with: this run and boot (on every "sent, answer unknown" mark), the wall
/// clock, whether the wall clock is known synchronised now (`WallClock.isSynchronized`), and the seconds since
/// this boot began (CLOCK_BOOTTIME: a call of this boot is this clock's difference old, and a call of an
/// earlier boot is at least this old).
struct OrderStamps: Sendable {
    let run: AgentRun
    let wallTime: @Sendable () -> Double
    let clockSynchronized: @Sendable () -> Bool
    let sinceBoot: @Sendable () -> Double
}
