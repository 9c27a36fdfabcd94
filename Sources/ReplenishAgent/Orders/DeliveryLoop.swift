import Logging

/// Where a press becomes an order: the delivery loop. `accept` has the press written to the outbox
/// (`OrderBook`, before anything is sent) and returns; `run` delivers the pending entries to DRS with
/// `DeliveryPolicy`'s rules, across network outages, server errors, token rejections and restarts. A press is
/// never lost and never sent twice while a call for it is still unanswered. What to do when is
/// `DeliveryMachine`'s: each step looks at the outbox and the pairing once and carries out its action.
final actor DeliveryLoop<C: Clock> where C.Duration == Duration {
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
    /// When to send, park, retry and write again (in memory: after a restart every pending entry is due at once).
    private var machine = DeliveryMachine<C.Instant>()
    /// The slots of the config: an entry for any other slot (a config changed since the press) is parked.
    private let configuredSlots: Set<String>

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
        guard let pairing = await drs.tokens.pairing() else {
            throw AgentError(
                .notPaired,
                "not paired: pair the device first (the companion app, or the code replenish-agent status shows)")
        }
        // A call that leaves at once (a token at hand, the slot not backing off) is marked "sent, answer unknown"
        // in the press's own write: one write before the request leaves, not two (`deliver` takes it back if not).
        let now = clock.now
        let markNow = OrderBook.MarkNow(
            ifQueued: pairing.hasUsableAccessToken && machine.sendsAtOnce(slot: slot, queued: true, at: now),
            ifCoalesced: pairing.hasUsableAccessToken && machine.sendsAtOnce(slot: slot, queued: false, at: now))
        let acceptance = try await book.accept(
            slot: slot, fromSensor: fromSensor, pairingId: pairing.pairingId, markNow: markNow)
        machine.pressRecorded(slot: slot, queued: acceptance.kind == .queued, at: clock.now)
        waker.ring()
        return acceptance
    }

    /// The device left the account (`reason`): its queued presses go, and what this loop knew of their calls.
    func forgetAccount(reason: String) async throws(AgentError) {
        machine.wiped()
        defer { waker.ring() }
        try await book.forgetAccount(reason: reason)
    }

    /// Factory reset: every queued press is forgotten, the file overwritten and removed.
    func wipe() async throws(AgentError) {
        try await book.wipe()
        machine.wiped()
        waker.ring()
    }

    /// The wall clock was just set: whatever failed meanwhile (TLS refuses certificates "not yet valid" while
    /// the clock says 1970) is tried again now, not at the end of its backoff.
    func retryNow() {
        machine.clockSet()
        waker.ring()
    }

    /// Something changed elsewhere (new tokens, network back): look at the outbox again now.
    func poke() {
        machine.tokensChanged()
        waker.ring()
    }

    func run() async {
        while !Task.isCancelled { await waker.wait(for: await step(), clock: clock) }
    }

    /// Carries out the machine's actions until it says wait; returns the wait. Each turn reads the pairing and
    /// the outbox's pending entries once (`OrderBook.look`), and parks only what that look found must not be sent.
    func step() async -> LoopStep<C.Instant> {
        var worked = false
        while !Task.isCancelled {
            // The pairing's tag is known only while paired; unpaired, entries wait for the next pairing to judge.
            let pairingId: String?? = await drs.tokens.pairing().map { .some($0.pairingId) } ?? .none
            let pending = await book.look(configuredSlots: configuredSlots, pairingId: pairingId)
            switch machine.next(pending: pending, paired: pairingId != nil, at: clock.now) {
            case .retryWrite:
                await commit { _ in }
            case .park:
                do throws(AgentError) {
                    try await book.parkStale(configuredSlots: configuredSlots, pairingId: pairingId)
                } catch {
                    written(error)
                }
            case .send(let slot):
                await deliver(slot: slot)
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

    /// One try of the slot's pending entry: a token, the "sent, answer unknown" mark, the call, and what its
    /// answer decides (`DeliveryPolicy`), carried out in one place (`apply`).
    private func deliver(slot: String) async {
        var refreshed = false
        while true {
            let token: Secret
            do { token = try await drs.tokens.accessToken() } catch {
                await noToken(slot: slot, error)
                return
            }
            // "Sent, answer unknown" is durable before the call leaves: after a power cut the agent knows it
            // may have ordered (and stops resending after a day, when DRS no longer de-duplicates). A try after a
            // rejected token first records that the rejected call was answered (in the same write).
            let unmarked: Outbox.Entry
            do throws(AgentError) {
                guard let before = try await book.markSending(slot: slot, answeredBefore: refreshed) else { return }
                unmarked = before
            } catch {
                written(error)
                return
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
                    _ = try await drs.tokens.accessTokenReplacing(token)
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
        let at = book.stamps.wallTime()
        switch decision {
        case .done(let detailCode, let eventInstanceId):
            // The entry goes, and with it the mark the answer ends.
            await commit(.acknowledged(slot: slot, detailCode: detailCode)) {
                $0.recordAnswer(slot: slot, detailCode: detailCode, eventInstanceId: eventInstanceId, at: at)
            }
            machine.tried(slot, .finished, at: clock.now)
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
            machine.tried(slot, .finished, at: clock.now)
            logger.error("order parked", metadata: ["order.slot": "\(slot)", "order.reason": "\(reason)"])
            if why == .notSubscribed { await notSubscribed(slot) }
        }
    }

    /// No token now: the press stays and the mark written with it goes back. Unpaired, it waits for the tokens to
    /// change; with LWA failing, for the token manager's own backoff (`retryAfter`), never asking LWA sooner.
    private func noToken(slot: String, _ error: AgentError) async {
        do throws(AgentError) { try await book.unmarkAccepted(slot: slot) } catch { written(error) }
        let event = OrderEvent.retrying(slot: slot, network: error.code == .network)
        guard error.code != .notPaired else {
            machine.tried(slot, .noToken(retryAfter: nil), at: clock.now)
            return await book.tell(event)
        }
        let delay = error.retryAfter ?? Backoff.tokenRefresh.minimum(attempt: 1)
        machine.tried(slot, .noToken(retryAfter: delay), at: clock.now)
        await book.tell(event)
        logRetry(slot, after: delay, reason: error.message, attempts: await book.attempts(slot: slot))
    }

    /// The slot is tried again after `delay`; `change` (the try's attempt counted) is written first.
    private func schedule(
        _ slot: String, after delay: Duration, reason: String, network: Bool,
        change: @escaping @Sendable (inout Outbox) -> Void
    ) async {
        let attempts = await commit(.retrying(slot: slot, network: network)) {
            change(&$0)
            return $0.entry(for: slot)?.attempts ?? 0
        }
        machine.tried(slot, .retry(after: delay), at: clock.now)
        logRetry(slot, after: delay, reason: reason, attempts: attempts)
    }

    private func logRetry(_ slot: String, after delay: Duration, reason: String, attempts: Int?) {
        var metadata: Logger.Metadata = [
            "order.slot": "\(slot)", "order.reason": "\(reason)", "order.retryIn": "\(delay.components.seconds)s",
        ]
        if let attempts { metadata["order.attempts"] = "\(attempts)" }
        logger.warning("order not sent yet; will retry", metadata: metadata)
    }

    /// `OrderBook.commit`, with what the machine must know of the write (a failed one is tried again on a timer,
    /// and nothing is sent meanwhile). Returns what `change` returned (nil when the write failed).
    @discardableResult
    private func commit<T: Sendable>(_ event: OrderEvent? = nil, _ change: @Sendable (inout Outbox) -> T) async -> T? {
        do throws(AgentError) {
            let result = try await book.commit(event, change)
            machine.written(failedRetryingIn: nil, at: clock.now)
            return result
        } catch {
            written(error)
            return nil
        }
    }

    private func written(_ failure: AgentError) {
        machine.written(failedRetryingIn: failure.retryAfter ?? Backoff.floor, at: clock.now)
    }
}
