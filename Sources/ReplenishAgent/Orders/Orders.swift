import FoundationEssentials
import Logging

/// Where a press becomes an order. `accept` writes the press durably to the outbox (before anything is
/// sent) and returns; `run` delivers pending entries to DRS with `DeliveryPolicy`'s rules, across network
/// outages, server errors, token rejections and restarts. A press is never lost and never sent twice while
/// a call for it is still unanswered.
actor Orders<C: Clock> where C.Duration == Duration {
    private let path: String
    private let drs: DRSSession
    private let tokens: TokenManager<C>
    /// DRS refused an order as not subscribed (`Subscriptions.refused`).
    private let notSubscribed: @Sendable (String) async -> Void
    private let clock: C
    private let wallTime: @Sendable () -> Double
    private let logger: Logger
    private let waker = Waker()
    private var random: RandomSource
    private var outbox: Outbox
    /// When to send, retry and write again (in memory: after a restart every pending entry is due at once).
    private var timeline = OrderTimeline<C.Instant>()
    /// The slots of the config: an entry for any other slot (a config changed since the press) is parked.
    private let configuredSlots: Set<String>
    /// The outbox's writes that failed in a row, and the backoff of the next (the tokens' is the same value).
    private var writes = WriteRetry()
    /// One outbox change at a time across its write (`DiskLane`, off the event loop).
    private let turns = WriteTurns()
    /// Entries whose "sent, answer unknown" mark was written with the press (`accept`), before their call left,
    /// as they were before it: what the mark goes back to when the call does not leave after all.
    private var markedAtAccept: [String: Outbox.Entry] = [:]
    /// The first step was taken (it parks what must not be sent).
    private var started = false
    /// Every order event with the outbox as it then is; published, never awaited.
    nonisolated let updates = Broadcast<Update>()
    /// This run and its boot (`AgentRun`), stamped on every "sent, answer unknown" mark.
    private let run: AgentRun
    /// Whether the wall clock is known synchronised now (`WallClock.isSynchronized`).
    private let clockSynchronized: @Sendable () -> Bool
    /// Seconds since this boot began (CLOCK_BOOTTIME): stamped on every mark (a call of this boot is this
    /// clock's difference old), and a call of an earlier boot is at least this old.
    private let sinceBoot: @Sendable () -> Double

    /// What happened to an order, for the LED and the logs.
    enum Event: Sendable, Equatable {
        case queued(slot: String)
        case retrying(slot: String, network: Bool)
        case acknowledged(slot: String, detailCode: String)
        case parked(slot: String, reason: String)
    }

    /// An order event and the outbox right after it.
    struct Update: Sendable {
        var event: Event
        var outbox: Outbox
    }

    private func publish(_ event: Event) {
        updates.publish(Update(event: event, outbox: outbox))
    }

    init(
        stateDirectory: String, slots: [String], drs: DRSSession, tokens: TokenManager<C>,
        notSubscribed: @escaping @Sendable (String) async -> Void = { _ in }, clock: C,
        wallTime: @escaping @Sendable () -> Double, random: RandomSource = .system,
        run: AgentRun,
        clockSynchronized: @escaping @Sendable () -> Bool = { WallClock.isSynchronized() },
        sinceBoot: @escaping @Sendable () -> Double = { WallClock.sinceBoot() },
        logger: Logger
    ) throws(AgentError) {
        self.run = run
        self.clockSynchronized = clockSynchronized
        self.sinceBoot = sinceBoot
        path = Self.path(stateDirectory: stateDirectory)
        self.drs = drs
        self.tokens = tokens
        self.notSubscribed = notSubscribed
        self.clock = clock
        self.wallTime = wallTime
        self.random = random
        self.logger = logger
        configuredSlots = Set(slots)
        outbox = try Self.movingLegacyOrders(
            into: try StateFile.load(Outbox.self, from: path) { logger.error("\($0)") } ?? Outbox(),
            stateDirectory: stateDirectory, logger: logger)
    }

    /// Earlier builds kept each slot's orders and the order history in `status.json`: the first start of
    /// this build moves them here (written now, at the start, before the event loop serves), and `DutyBook`
    /// leaves them out of its next write.
    static func movingLegacyOrders(into loaded: Outbox, stateDirectory: String, logger: Logger) throws(AgentError)
        -> Outbox
    {
        var outbox = loaded
        guard outbox.adoptLegacyOrders(stateDirectory: stateDirectory) else { return loaded }
        try DiskLane.saveNow(outbox, to: path(stateDirectory: stateDirectory))
        logger.notice("the slots' orders and the order history moved from status.json to outbox.json")
        return outbox
    }

    static func path(stateDirectory: String) -> String { POSIX.join(stateDirectory, "outbox.json") }

    var snapshot: Outbox { outbox }

    /// Accepts a press for `slot`: durable when this returns. Refused when the device is not paired (whether
    /// the slot is subscribed is `Subscriptions`', asked before).
    /// `fromSensor`: a level sensor's low, whose order latches the slot until a refill. The press's consumption
    /// (and the latch) travel in the same write as the press.
    func accept(slot: String, fromSensor: Bool = false) async throws(AgentError) -> Outbox.Acceptance {
        guard await tokens.isPaired else {
            throw AgentError(
                .notPaired,
                "not paired: pair the device first (the companion app, or the code replenish-agent status shows)")
        }
        await turns.take()
        defer { turns.release() }
        var next = outbox
        // A press of this boot does not wait behind an earlier boot's call whose age cannot be told yet.
        let replacesWaiting =
            outbox.entry(for: slot).map {
                Outbox.waitsForClock($0, run: run, clockSynchronized: clockSynchronized())
            } ?? false
        let now = wallTime()
        let acceptance = next.accept(
            slot: slot, at: now, pairingId: await tokens.pairingId, replacesWaiting: replacesWaiting)
        if acceptance == .queued || fromSensor { next.recordConsumption(slot: slot, fromSensor: fromSensor, at: now) }
        // A new entry (the first press, or one replacing a parked or waiting entry): what was remembered of an
        // older entry's mark is not this entry's.
        if acceptance == .queued { markedAtAccept[slot] = nil }
        // The call that follows at once (a token at hand, the slot not backing off) is marked "sent, answer
        // unknown" in this same write, so the press costs one write before its request leaves, not two; a call
        // that then does not leave takes the mark back (`deliver`).
        if await tokens.hasUsableAccessToken, markedAtAccept[slot] == nil, let entry = next.entry(for: slot),
            !entry.isParked, !Outbox.waitsForClock(entry, run: run, clockSynchronized: clockSynchronized()),
            timeline.sendsAtOnce(slot: slot, queued: acceptance == .queued, at: clock.now)
        {
            next.markSending(slot: slot, at: now, run: run, uptime: sinceBoot())
            markedAtAccept[slot] = entry
        }
        // Durable before the answer, and before the run loop can see it (and send it).
        do { try await DiskLane.outbox.save(next, to: path) } catch {
            markedAtAccept[slot] = nil
            throw error
        }
        outbox = next
        writes.succeeded()
        timeline.accepted(slot: slot, queued: acceptance == .queued)
        if replacesWaiting {
            logger.notice(
                "this press replaces an order of an earlier boot that waited for the wall clock",
                metadata: ["order.slot": "\(slot)"])
        }
        logger.info("press accepted", metadata: ["order.slot": "\(slot)", "order.acceptance": "\(acceptance)"])
        waker.ring()
        publish(.queued(slot: slot))
        return acceptance
    }

    // MARK: The slots' orders (`SlotOrders`): read by the press and the follow-up, changed only here

    func sensorOrderedWhileLow(_ slot: String) -> Bool { outbox.slots[slot]?.sensorOrderedWhileLow == true }

    func consumedAt(_ slot: String) -> [Double] { outbox.slots[slot]?.consumedAt ?? [] }

    /// The slot's order while DRS has not said it is final.
    func openOrder(slot: String) -> (eventInstanceId: String, status: String?)? { outbox.openOrder(slot: slot) }

    /// The slots whose last placed order is still followed up.
    func openOrders(of slots: [String]) -> [(slot: String, eventInstanceId: String)] {
        slots.compactMap { slot in outbox.openOrder(slot: slot).map { (slot, $0.eventInstanceId) } }
    }

    /// A level sensor's refill was seen: the next low orders again.
    func recordRefill(slot: String) async throws(AgentError) {
        try await commitOrThrow { $0.slots[slot, default: .init()].sensorOrderedWhileLow = nil }
    }

    /// A press for a slot whose order is still open: counted on that order, not sent.
    func recordPressWhileOpen(slot: String, at time: Double) async throws(AgentError) {
        try await commitOrThrow { $0.recordPressWhileOpen(slot: slot, at: time) }
    }

    /// `getOrderInfo` said `state` of the slot's order `id` (`OrderTracker`).
    func recordFollowUp(slot: String, eventInstanceId id: String, state: String, open: Bool, at time: Double)
        async throws(AgentError)
    {
        try await commitOrThrow {
            $0.recordFollowUp(slot: slot, eventInstanceId: id, status: state, open: open, at: time)
        }
    }

    /// DRS cancelled the test orders of `slots` (`TestOrderCancellation`).
    func recordTestOrdersCancelled(slots: [String], at time: Double) async throws(AgentError) {
        try await commitOrThrow { $0.recordTestOrdersCancelled(slots: slots, at: time) }
    }

    /// The device left the customer's account (a reset of the pairing, an identity change: `reason`): its
    /// queued presses go, each one still to send recorded in the history as not sent and logged; the history
    /// stays.
    func forgetAccount(reason: String) async throws(AgentError) {
        markedAtAccept.removeAll()
        timeline.wiped()
        let now = wallTime()
        var dropped: [String] = []
        try await commitOrThrow { dropped = $0.forgetAccount(reason: reason, at: now) }
        for slot in dropped {
            logger.warning(
                "a queued press was dropped, never sent",
                metadata: ["order.slot": "\(slot)", "order.reason": "\(reason)"])
        }
        waker.ring()
    }

    /// `commit`, for a change whose caller must hear that it is not written (it stays in memory and is written
    /// with the next write that succeeds).
    private func commitOrThrow(_ change: (inout Outbox) -> Void) async throws(AgentError) {
        guard await commit(change) else {
            throw AgentError(.storage, "could not write \(path); the change is kept in memory and written later")
        }
    }

    /// Factory reset: every queued press is forgotten, the file overwritten and removed.
    func wipe() async throws(AgentError) {
        await turns.take()
        defer { turns.release() }
        try await DiskLane.outbox.shred(path)
        outbox = Outbox()
        markedAtAccept.removeAll()
        timeline.wiped()
        writes.succeeded()
        waker.ring()
    }

    /// The wall clock was just set: whatever failed meanwhile (TLS refuses certificates "not yet valid" while
    /// the clock says 1970) is tried again now, not at the end of its backoff.
    func retryNow() {
        timeline.clockSet()
        waker.ring()
    }

    /// Something changed elsewhere (new tokens, network back): look at the outbox again now.
    func poke() {
        timeline.tokensChanged()
        waker.ring()
    }

    func run() async {
        while !Task.isCancelled { await waker.wait(for: await step(), clock: clock) }
    }

    /// Carries out the timeline's actions until it says wait; returns the wait. The first step parks what
    /// must not be sent (a slot no longer configured, a call unanswered for over a day).
    func step() async -> LoopStep<C.Instant> {
        var worked = false
        if !started {
            started = true
            worked = await parkStale()
        }
        while !Task.isCancelled {
            let synchronized = clockSynchronized()
            let pending = outbox.pending.map { entry in
                OrderTimeline<C.Instant>.Pending(
                    slot: entry.slot,
                    waitsForClock: Outbox.waitsForClock(entry, run: run, clockSynchronized: synchronized))
            }
            // An entry waiting for the clock is judged again at every look (its wait is bounded: `parkStale`).
            if pending.contains(where: \.waitsForClock), await parkStale() {
                worked = true
                continue
            }
            switch timeline.next(pending: pending, paired: await tokens.isPaired, at: clock.now) {
            case .retryWrite:
                await commit(rewrite: true) { _ in }
            case .send(let slot):
                if await !parkStale() { await deliver(slot: slot) }
            case .sayWaitingForClock(let slots):
                logger.notice(
                    "an order waits for the wall clock to be synchronised before it is resent",
                    metadata: ["order.slots": "\(slots.joined(separator: ","))"])
            case .wait(let until):
                return .wait(until: until, worked: worked)
            }
            worked = true
        }
        return .wait(until: nil, worked: worked)
    }

    /// Parks entries that must not be sent: a slot no longer configured, or a call unanswered for over a day.
    /// Returns true when it parked any.
    @discardableResult
    private func parkStale() async -> Bool {
        // The pairing's tag is known only while paired; unpaired, entries wait for the next pairing to judge.
        let pairingId: String?? = await tokens.isPaired ? .some(await tokens.pairingId) : .none
        let (now, synchronized, sinceBoot) = (wallTime(), clockSynchronized(), sinceBoot())
        var parked: [(slot: String, reason: String)] = []
        await commit { next in
            parked = next.parkStale(
                now: now, configuredSlots: configuredSlots, pairingId: pairingId, run: run,
                clockSynchronized: synchronized, sinceBoot: sinceBoot)
        }
        guard !parked.isEmpty else { return false }
        for (slot, reason) in parked {
            logger.error("order parked", metadata: ["order.slot": "\(slot)", "order.reason": "\(reason)"])
            publish(.parked(slot: slot, reason: reason))
        }
        return true
    }

    private func deliver(slot: String) async {
        var refreshed = false
        while true {
            let token: Secret
            do {
                token = try await drs.token()
            } catch {
                // The mark written with the press goes back: this call does not leave now.
                if let before = markedAtAccept.removeValue(forKey: slot) {
                    await commit { $0.unmarkSending(slot: slot, previous: before) }
                }
                // No token to be had now: keep the press. Not paired: wait until the tokens change (they poke
                // this service). LWA failing: wait for the token manager's own backoff deadline, which it
                // hands out in `retryAfter`, so the order path never asks LWA more often than the schedule does.
                timeline.noToken(slot, notPaired: error.code == .notPaired, at: clock.now)
                if error.code != .notPaired {
                    await schedule(
                        slot, after: error.retryAfter ?? Backoff.tokenRefresh.minimum(attempt: 1),
                        reason: error.message, countAttempt: false)
                }
                publish(.retrying(slot: slot, network: error.code == .network))
                return
            }
            // "Sent, answer unknown" is durable before the call leaves: after a power cut the agent knows it
            // may have ordered (and stops resending after a day, when DRS no longer de-duplicates).
            guard let unmarked = markedAtAccept.removeValue(forKey: slot) ?? outbox.entry(for: slot) else { return }
            let (sendingAt, uptime, run) = (wallTime(), sinceBoot(), run)
            guard await commit({ $0.markSending(slot: slot, at: sendingAt, run: run, uptime: uptime) }) else { return }
            let attemptNumber = (outbox.entry(for: slot)?.attempts ?? 0) + 1
            // One line per request that leaves the device, written before it is sent (the transport resends
            // nothing on its own, so the server sees exactly the attempts logged here).
            logger.info(
                "sending replenish", metadata: ["order.slot": "\(slot)", "order.attempt": "\(attemptNumber)"])
            let result: Result<HTTPResponse, AgentError>
            do { result = .success(try await drs.sendOnce(.replenish(slot: slot), token: token)) } catch {
                result = .failure(error)
            }
            let attempt = attemptNumber
            switch result {
            case .success:
                // Any answer says what happened to this call; only a call with no answer stays unknown.
                // Written with what the answer decides, below.
                await change { $0.markAnswered(slot: slot) }
            case .failure(let error) where error.requestNeverSent:
                // No byte left the device (no route, refused, TLS or certificate failure): DRS cannot have
                // placed anything, so this try does not make the press "sent, answer unknown" (a day offline
                // would otherwise park it). Written with the attempt count below.
                await change { $0.unmarkSending(slot: slot, previous: unmarked) }
            case .failure:
                break
            }
            let decision = DeliveryPolicy.decide(
                result, attempt: attempt, tokenAlreadyRefreshed: refreshed, using: &random)
            switch decision {
            case .done(let detailCode, let eventInstanceId):
                // The press done and DRS's answer recorded: one write.
                let at = wallTime()
                await commit {
                    $0.complete(slot: slot)
                    $0.recordAnswer(slot: slot, detailCode: detailCode, eventInstanceId: eventInstanceId, at: at)
                }
                timeline.done(slot)
                logger.info(
                    "order acknowledged", metadata: ["order.slot": "\(slot)", "order.detailCode": "\(detailCode)"])
                publish(.acknowledged(slot: slot, detailCode: detailCode))
                return
            case .refreshTokenAndRetry:
                refreshed = true
                logger.info("DRS rejected the access token; refreshing once", metadata: ["order.slot": "\(slot)"])
                do { _ = try await drs.tokenReplacing(token) } catch {
                    await schedule(
                        slot, after: error.retryAfter ?? Backoff.orders.delay(attempt: attempt, using: &random),
                        reason: error.message, countAttempt: true)
                    publish(.retrying(slot: slot, network: error.code == .network))
                    return
                }
            case .retry(let delay, let reason):
                await schedule(slot, after: delay, reason: reason, countAttempt: true)
                if case .failure(let error) = result {
                    publish(.retrying(slot: slot, network: error.code == .network))
                } else {
                    publish(.retrying(slot: slot, network: false))
                }
                return
            case .park(let why):
                let (at, reason) = (wallTime(), why.text)
                await commit {
                    $0.park(slot: slot, reason: reason)
                    $0.recordRefusal(slot: slot, reason: reason, at: at)
                }
                logger.error("order parked", metadata: ["order.slot": "\(slot)", "order.reason": "\(reason)"])
                if why == .notSubscribed { await notSubscribed(slot) }
                publish(.parked(slot: slot, reason: reason))
                return
            }
        }
    }

    private func schedule(_ slot: String, after delay: Duration, reason: String, countAttempt: Bool) async {
        if countAttempt { await commit { $0.recordAttempt(slot: slot) } }
        timeline.retry(slot, after: delay, at: clock.now)
        logger.warning(
            "order not sent yet; will retry",
            metadata: [
                "order.slot": "\(slot)", "order.reason": "\(reason)",
                "order.retryIn": "\(delay.components.seconds)s",
                "order.attempts": "\(outbox.entry(for: slot)?.attempts ?? 0)",
            ])
    }

    /// Applies `change` to the outbox and writes the result on the disk lane (one change at a time,
    /// `WriteTurns`), unless it changed nothing and the file is up to date (`rewrite`: write anyway, the retry of
    /// a failed write). A failed write (disk full) keeps the change in memory, so the service acts on what really
    /// happened, and retries the write on a timer (nothing is sent meanwhile). The file still holds the older
    /// state: an entry completed in memory is still there with its "sent, answer unknown" mark, so a restart
    /// resends it at most within a day, when DRS de-duplicates it. Returns whether the outbox is written.
    /// Applies `change` to the outbox in memory, in turn with the writes; the next `commit` writes it.
    private func change(_ change: (inout Outbox) -> Void) async {
        await turns.take()
        defer { turns.release() }
        change(&outbox)
        forgetMarksOfGoneEntries()
    }

    /// A mark remembered from `accept` is kept only while its entry is still waiting to be tried with that mark:
    /// an entry completed, parked or replaced before its call was tried takes its remembered state with it.
    private func forgetMarksOfGoneEntries() {
        markedAtAccept = markedAtAccept.filter { slot, _ in
            outbox.entry(for: slot).map { !$0.isParked && $0.unansweredSince != nil } ?? false
        }
    }

    @discardableResult
    private func commit(rewrite: Bool = false, _ change: (inout Outbox) -> Void) async -> Bool {
        await turns.take()
        defer { turns.release() }
        var next = outbox
        change(&next)
        if next == outbox, !rewrite, timeline.writeRetryAt == nil { return true }
        outbox = next
        forgetMarksOfGoneEntries()
        do {
            try await DiskLane.outbox.save(next, to: path)
            if timeline.writeRetryAt != nil { logger.notice("the outbox is written now") }
            timeline.written(failedRetryingIn: nil, at: clock.now)
            writes.succeeded()
            return true
        } catch {
            let delay = writes.failed(using: &random)
            timeline.written(failedRetryingIn: delay, at: clock.now)
            logger.error(
                "could not write the outbox; nothing is sent until it is written",
                metadata: ["error": "\(error.message)", "order.retryIn": "\(delay.components.seconds)s"])
            return false
        }
    }
}

extension Orders: TokenFollower {
    /// New tokens (a pairing, a refresh) let the entries that waited for them go at once.
    nonisolated func follow(tokens: AsyncStream<TokenEvent>) async {
        for await case .changed in tokens { await poke() }
    }
}
