import Logging

/// Where a press becomes an order: the delivery loop. `accept` has the press written to the outbox
/// (`OrderBook`, before anything is sent) and returns; `run` delivers the pending entries to DRS with
/// `DeliveryPolicy`'s rules, across network outages, server errors, token rejections and restarts. A press is
/// never lost and never sent twice while a call for it is still unanswered.
actor Orders<C: Clock> where C.Duration == Duration {
    /// The order facts; every change of them is its `commit`.
    nonisolated let book: OrderBook
    /// The one road to DRS and to the tokens (the pairing, a token, one refresh on a rejection).
    private let drs: DRSSession
    /// DRS refused an order as not subscribed (`Subscriptions.refused`).
    private let notSubscribed: @Sendable (String) async -> Void
    private let clock: C
    private let logger: Logger
    private let waker = Waker()
    private var random: RandomSource
    /// When to send, retry and write again (in memory: after a restart every pending entry is due at once).
    private var timeline = OrderTimeline<C.Instant>()
    /// The slots of the config: an entry for any other slot (a config changed since the press) is parked.
    private let configuredSlots: Set<String>
    /// The presses written with their call's mark (`AcceptMarks`).
    private var marks = AcceptMarks()
    /// The first step was taken (it parks what must not be sent).
    private var started = false

    init(
        book: OrderBook, slots: [String], drs: DRSSession,
        notSubscribed: @escaping @Sendable (String) async -> Void = { _ in }, clock: C,
        random: RandomSource = .system, logger: Logger
    ) {
        self.book = book
        self.drs = drs
        self.notSubscribed = notSubscribed
        self.clock = clock
        self.random = random
        self.logger = logger
        configuredSlots = Set(slots)
    }

    /// Accepts a press for `slot` (`fromSensor`: a level sensor's low): durable when this returns; refused unpaired.
    func accept(slot: String, fromSensor: Bool = false) async throws(AgentError) -> OrderBook.Acceptance {
        guard let pairing = await drs.pairing() else {
            throw AgentError(
                .notPaired,
                "not paired: pair the device first (the companion app, or the code replenish-agent status shows)")
        }
        // A call that leaves at once (a token at hand, the slot not backing off) is marked "sent, answer unknown"
        // in the press's own write: one write before the request leaves, not two (`deliver` takes it back if not).
        let now = clock.now
        let markNow = OrderBook.MarkNow(
            ifQueued: pairing.hasUsableAccessToken && timeline.sendsAtOnce(slot: slot, queued: true, at: now),
            ifCoalesced: pairing.hasUsableAccessToken && !marks.has(slot)
                && timeline.sendsAtOnce(slot: slot, queued: false, at: now))
        let acceptance = try await book.accept(
            slot: slot, fromSensor: fromSensor, pairingId: pairing.pairingId, markNow: markNow)
        if acceptance.kind == .queued { marks.forget(slot) }
        if let before = acceptance.markedFrom { marks.remember(slot, before: before) }
        timeline.accepted(slot: slot, queued: acceptance.kind == .queued)
        waker.ring()
        return acceptance
    }

    /// The device left the account (`reason`): its queued presses go, and what this loop knew of their calls.
    func forgetAccount(reason: String) async throws(AgentError) {
        marks.forgetAll()
        timeline.wiped()
        defer { waker.ring() }
        try await book.forgetAccount(reason: reason)
    }

    /// Factory reset: every queued press is forgotten, the file overwritten and removed.
    func wipe() async throws(AgentError) {
        try await book.wipe()
        marks.forgetAll()
        timeline.wiped()
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
            let pending = await book.pending().map {
                OrderTimeline<C.Instant>.Pending(slot: $0.slot, waitsForClock: $0.waitsForClock)
            }
            // An entry waiting for the clock is judged again at every look (its wait is bounded: `parkStale`).
            if pending.contains(where: \.waitsForClock), await parkStale() {
                worked = true
                continue
            }
            switch timeline.next(pending: pending, paired: await drs.pairing() != nil, at: clock.now) {
            case .retryWrite:
                await commit { _ in }
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

    /// Parks entries that must not be sent (`OrderBook.parkStale`). Returns true when it parked any.
    @discardableResult
    private func parkStale() async -> Bool {
        // The pairing's tag is known only while paired; unpaired, entries wait for the next pairing to judge.
        let pairingId: String?? = await drs.pairing().map { .some($0.pairingId) } ?? .none
        do throws(AgentError) {
            let parked = try await book.parkStale(configuredSlots: configuredSlots, pairingId: pairingId)
            marks.keepOnlyWaiting(in: await book.snapshot)
            return !parked.isEmpty
        } catch {
            written(error)
            return false
        }
    }

    /// One try of the slot's pending entry: a token, the "sent, answer unknown" mark, the call, and what its
    /// answer decides (`DeliveryPolicy`), carried out in one place (`apply`).
    private func deliver(slot: String) async {
        var refreshed = false
        while true {
            let token: Secret
            do { token = try await drs.token() } catch {
                await noToken(slot: slot, error)
                return
            }
            // "Sent, answer unknown" is durable before the call leaves: after a power cut the agent knows it
            // may have ordered (and stops resending after a day, when DRS no longer de-duplicates). A try after a
            // rejected token first records that the rejected call was answered (in the same write).
            let unmarked: Outbox.Entry
            if let before = marks.take(slot) {
                unmarked = before
            } else {
                do throws(AgentError) {
                    guard let before = try await book.markSending(slot: slot, answeredBefore: refreshed) else {
                        return
                    }
                    unmarked = before
                } catch {
                    written(error)
                    return
                }
            }
            // Stopping: the call does not leave; the mark stays and the restart resends it (DRS de-duplicates).
            guard !Task.isCancelled else { return }
            let attempt = unmarked.attempts + 1
            // One line per request that leaves the device, written before it is sent (the transport resends
            // nothing on its own, so the server sees exactly the attempts logged here).
            logger.info("sending replenish", metadata: ["order.slot": "\(slot)", "order.attempt": "\(attempt)"])
            let result: Result<HTTPResponse, AgentError>
            do { result = .success(try await drs.sendOnce(.replenish(slot: slot), token: token)) } catch {
                result = .failure(error)
            }
            var decision = DeliveryPolicy.decide(
                result, attempt: attempt, tokenAlreadyRefreshed: refreshed, using: &random)
            // What the LED shows of a retry: whether the network failed.
            var network = if case .failure(let error) = result { error.code == .network } else { false }
            if case .refreshTokenAndRetry = decision {
                refreshed = true
                logger.info("DRS rejected the access token; refreshing once", metadata: ["order.slot": "\(slot)"])
                do throws(AgentError) {
                    _ = try await drs.tokenReplacing(token)
                    continue
                } catch {
                    // The call was answered (the rejection); the refresh's failure is what the LED shows.
                    decision = .retry(
                        after: error.retryAfter ?? Backoff.orders.delay(attempt: attempt, using: &random),
                        reason: error.message)
                    network = error.code == .network
                }
            }
            await apply(decision, to: slot, result: result, unmarked: unmarked, network: network)
            return
        }
    }

    /// Carries out what the answer to one try decided, in one write: what the answer says of the call (any answer
    /// ends "answer unknown"; a try of which no byte left takes the mark back), and the decision's change.
    private func apply(
        _ decision: DeliveryPolicy.Decision, to slot: String, result: Result<HTTPResponse, AgentError>,
        unmarked: Outbox.Entry, network: Bool
    ) async {
        let answered: @Sendable (inout Outbox) -> Void =
            switch result {
            case .success: { $0.markAnswered(slot: slot) }
            // No byte left the device (no route, refused, TLS or certificate failure): DRS cannot have placed
            // anything, so this try does not make the press "sent, answer unknown" (a day offline would
            // otherwise park it).
            case .failure(let error) where error.requestNeverSent: { $0.unmarkSending(slot: slot, previous: unmarked) }
            case .failure: { _ in }
            }
        let at = book.wallTime()
        switch decision {
        case .done(let detailCode, let eventInstanceId):
            await commit(.acknowledged(slot: slot, detailCode: detailCode)) {
                answered(&$0)
                $0.complete(slot: slot)
                $0.recordAnswer(slot: slot, detailCode: detailCode, eventInstanceId: eventInstanceId, at: at)
            }
            timeline.done(slot)
            logger.info("order acknowledged", metadata: ["order.slot": "\(slot)", "order.detailCode": "\(detailCode)"])
        case .retry where Task.isCancelled && (try? result.get()) == nil:
            // The call failed as the agent stops: nothing learned to write behind a flash that may stall.
            break
        case .retry(let delay, let reason):
            await schedule(slot, after: delay, reason: reason, network: network) {
                answered(&$0)
                $0.recordAttempt(slot: slot)
            }
        case .refreshTokenAndRetry:
            // `deliver` refreshes and tries again, or turns a failed refresh into a retry: never applied here.
            break
        case .park(let why):
            let reason = why.text
            await commit(.parked(slot: slot, reason: reason)) {
                answered(&$0)
                $0.park(slot: slot, reason: reason)
                $0.recordRefusal(slot: slot, reason: reason, at: at)
            }
            logger.error("order parked", metadata: ["order.slot": "\(slot)", "order.reason": "\(reason)"])
            if why == .notSubscribed { await notSubscribed(slot) }
        }
    }

    /// No token now: the press stays and the mark written with it goes back. Unpaired, it waits for the tokens to
    /// change; with LWA failing, for the token manager's own backoff (`retryAfter`), never asking LWA sooner.
    private func noToken(slot: String, _ error: AgentError) async {
        if let before = marks.take(slot) {
            await commit { $0.unmarkSending(slot: slot, previous: before) }
        }
        timeline.noToken(slot, notPaired: error.code == .notPaired, at: clock.now)
        let event = OrderEvent.retrying(slot: slot, network: error.code == .network)
        guard error.code != .notPaired else { return await book.tell(event) }
        await schedule(
            slot, after: error.retryAfter ?? Backoff.tokenRefresh.minimum(attempt: 1), reason: error.message,
            network: error.code == .network, change: nil)
    }

    /// The slot is tried again after `delay`; `change` (the try's attempt counted) is written first.
    private func schedule(
        _ slot: String, after delay: Duration, reason: String, network: Bool,
        change: (@Sendable (inout Outbox) -> Void)?
    ) async {
        let event = OrderEvent.retrying(slot: slot, network: network)
        if let change { await commit(event, change) } else { await book.tell(event) }
        timeline.retry(slot, after: delay, at: clock.now)
        let attempts = await book.entry(for: slot)?.attempts ?? 0
        logger.warning(
            "order not sent yet; will retry",
            metadata: [
                "order.slot": "\(slot)", "order.reason": "\(reason)", "order.retryIn": "\(delay.components.seconds)s",
                "order.attempts": "\(attempts)",
            ])
    }

    /// `OrderBook.commit`, with what the timeline must know of the write (a failed one is tried again on a timer,
    /// and nothing is sent meanwhile).
    private func commit(_ event: OrderEvent? = nil, _ change: @Sendable (inout Outbox) -> Void) async {
        do throws(AgentError) {
            try await book.commit(event, change)
            timeline.written(failedRetryingIn: nil, at: clock.now)
        } catch {
            written(error)
        }
        marks.keepOnlyWaiting(in: await book.snapshot)
    }

    private func written(_ failure: AgentError) {
        timeline.written(failedRetryingIn: failure.retryAfter ?? Backoff.floor, at: clock.now)
    }
}
