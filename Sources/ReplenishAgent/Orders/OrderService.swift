import Logging

/// Where a press becomes an order. `accept` writes the press durably to the outbox (before anything is
/// sent) and returns; `run` delivers pending entries to DRS with `DeliveryPolicy`'s rules, across network
/// outages, server errors, token rejections and restarts. A press is never lost and never sent twice while
/// a call for it is still unanswered.
actor OrderService<C: Clock> where C.Duration == Duration {
    private let path: String
    private let drs: DRSClient
    private let tokens: TokenManager<C>
    private let status: StatusBook
    private let clock: C
    private let wallTime: @Sendable () -> Double
    private let logger: Logger
    private let waker = Waker()
    private var random: RandomSource
    private var outbox: Outbox
    /// When each slot may next be tried (in memory: after a restart every pending entry is due at once).
    private var notBefore: [String: C.Instant] = [:]
    private var eventHandlers: [@Sendable (Event, Outbox) async -> Void] = []

    /// What happened to an order, for the LED and the logs.
    enum Event: Sendable, Equatable {
        case queued(slot: String)
        case retrying(slot: String, network: Bool)
        case acknowledged(slot: String, detailCode: String)
        case parked(slot: String, reason: String)
    }

    /// Called after every order event with the outbox as it then is.
    func onEvent(_ handler: @escaping @Sendable (Event, Outbox) async -> Void) { eventHandlers.append(handler) }

    private func publish(_ event: Event) async {
        let outbox = outbox
        for handler in eventHandlers { await handler(event, outbox) }
    }

    init(
        stateDirectory: String, drs: DRSClient, tokens: TokenManager<C>, status: StatusBook, clock: C,
        wallTime: @escaping @Sendable () -> Double, random: RandomSource = .system,
        logger: Logger
    ) throws(AgentError) {
        path = Self.path(stateDirectory: stateDirectory)
        self.drs = drs
        self.tokens = tokens
        self.status = status
        self.clock = clock
        self.wallTime = wallTime
        self.random = random
        self.logger = logger
        outbox = try StateFile.load(Outbox.self, from: path) { logger.error("\($0)") } ?? Outbox()
    }

    static func path(stateDirectory: String) -> String { POSIX.join(stateDirectory, "outbox.json") }

    var snapshot: Outbox { outbox }

    /// Accepts a press for `slot`: durable when this returns. Refused when the device is not paired or DRS
    /// said the slot is not subscribed.
    func accept(slot: String) async throws(AgentError) -> Outbox.Acceptance {
        guard await tokens.isPaired else {
            throw AgentError(.notPaired, "not paired: pair the device with the companion app first")
        }
        if await status.subscribed(slot) == false {
            throw AgentError(.accessDenied, "slot \(slot) is not subscribed")
        }
        var next = outbox
        let acceptance = next.accept(slot: slot, at: wallTime())
        try StateFile.save(next, to: path)
        outbox = next
        if acceptance == .queued { notBefore[slot] = nil }
        logger.info("press accepted", metadata: ["order.slot": "\(slot)", "order.acceptance": "\(acceptance)"])
        waker.ring()
        await publish(.queued(slot: slot))
        return acceptance
    }

    /// Something changed elsewhere (new tokens, network back): look at the outbox again now.
    func poke() { waker.ring() }

    func run() async {
        while !Task.isCancelled {
            let now = clock.now
            let due = outbox.pending.first { entry in notBefore[entry.slot].map { $0 <= now } ?? true }
            if let due, await tokens.isPaired {
                await deliver(slot: due.slot)
                continue
            }
            let next = outbox.pending.compactMap { notBefore[$0.slot] }.min()
            let timeout: Duration? = (next.map { now.duration(to: $0) }).map { max($0, .zero) }
            await waker.wait(timeout: due == nil ? timeout : nil, clock: clock)
        }
    }

    private func deliver(slot: String) async {
        var refreshed = false
        while true {
            let token: Secret
            do {
                token = try await tokens.accessToken()
            } catch {
                // No token to be had now (LWA unreachable, or not paired): wait, keep the press.
                schedule(
                    slot,
                    after: Backoff.orders.delay(attempt: (outbox.entry(for: slot)?.attempts ?? 0) + 1, using: &random),
                    reason: error.message, countAttempt: false)
                await publish(.retrying(slot: slot, network: error.code == .network))
                return
            }
            // One line per request that leaves the device, written before it is sent (the transport resends
            // nothing on its own, so the server sees exactly the attempts logged here).
            logger.info(
                "sending replenish",
                metadata: ["order.slot": "\(slot)", "order.attempt": "\((outbox.entry(for: slot)?.attempts ?? 0) + 1)"])
            let result: Result<HTTPResponse, AgentError>
            do { result = .success(try await drs.replenish(slot: slot, token: token)) } catch {
                result = .failure(error)
            }
            let attempt = (outbox.entry(for: slot)?.attempts ?? 0) + 1
            let decision = DeliveryPolicy.decide(
                result, attempt: attempt, tokenAlreadyRefreshed: refreshed, using: &random)
            switch decision {
            case .done(let detailCode, let eventInstanceId):
                var next = outbox
                next.complete(slot: slot)
                saveOrLog(next)
                notBefore[slot] = nil
                logger.info(
                    "order acknowledged", metadata: ["order.slot": "\(slot)", "order.detailCode": "\(detailCode)"])
                let at = wallTime()
                try? await status.update { record in
                    record.slots[slot, default: .init()].lastResult = detailCode
                    record.slots[slot, default: .init()].lastResultAt = at
                    record.slots[slot, default: .init()].lastEventInstanceId = eventInstanceId
                }
                await publish(.acknowledged(slot: slot, detailCode: detailCode))
                return
            case .refreshTokenAndRetry:
                refreshed = true
                logger.info("DRS rejected the access token; refreshing once", metadata: ["order.slot": "\(slot)"])
                do { _ = try await tokens.accessTokenReplacing(token) } catch {
                    schedule(
                        slot, after: Backoff.orders.delay(attempt: attempt, using: &random), reason: error.message,
                        countAttempt: true)
                    await publish(.retrying(slot: slot, network: error.code == .network))
                    return
                }
            case .retry(let delay, let reason):
                schedule(slot, after: delay, reason: reason, countAttempt: true)
                if case .failure(let error) = result {
                    await publish(.retrying(slot: slot, network: error.code == .network))
                } else {
                    await publish(.retrying(slot: slot, network: false))
                }
                return
            case .park(let reason):
                var next = outbox
                next.park(slot: slot, reason: reason)
                saveOrLog(next)
                logger.error("order parked", metadata: ["order.slot": "\(slot)", "order.reason": "\(reason)"])
                let at = wallTime()
                try? await status.update { record in
                    record.slots[slot, default: .init()].lastResult = reason
                    record.slots[slot, default: .init()].lastResultAt = at
                    if reason == "not subscribed" { record.slots[slot, default: .init()].subscribed = false }
                }
                await publish(.parked(slot: slot, reason: reason))
                return
            }
        }
    }

    private func schedule(_ slot: String, after delay: Duration, reason: String, countAttempt: Bool) {
        if countAttempt {
            var next = outbox
            next.recordAttempt(slot: slot)
            saveOrLog(next)
        }
        notBefore[slot] = clock.now.advanced(by: max(delay, .milliseconds(100)))
        logger.warning(
            "order not sent yet; will retry",
            metadata: [
                "order.slot": "\(slot)", "order.reason": "\(reason)",
                "order.retryIn": "\(delay.components.seconds)s",
                "order.attempts": "\(outbox.entry(for: slot)?.attempts ?? 0)",
            ])
    }

    private func saveOrLog(_ next: Outbox) {
        do {
            try StateFile.save(next, to: path)
            outbox = next
        } catch {
            // Keep the in-memory state consistent with the file: the old file still holds the entry, so the
            // worst case after a crash is one more replenish, which DRS answers with ORDER_INPROGRESS.
            outbox = next
            logger.error("could not write the outbox", metadata: ["error": "\(error)"])
        }
    }
}
