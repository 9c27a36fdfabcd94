import FoundationEssentials
import Logging

/// The duties DRS asks of a paired device besides ordering: device status within 30 seconds of pairing or
/// start, then daily; the subscription of each slot at the same times (so presses for an unsubscribed slot
/// are refused at the button). Failures retry with backoff.
actor Duties<C: Clock> where C.Duration == Duration {
    static var interval: Duration { .seconds(24 * 3600) }

    private let drs: DRSSession
    private let tokens: TokenManager<C>
    private let status: StatusBook
    private let slots: [String]
    private let clock: C
    private let wallTime: @Sendable () -> Double
    private let logger: Logger
    private let waker = Waker()
    private var random = RandomSource.system
    private var dueAt: C.Instant?
    private var failures = 0
    /// Slot-status reports waiting to be sent (a level sensor found the slot low), oldest first.
    private var reports: [(slot: String, report: SlotStatusReport)] = []
    private var reportsNotBefore: C.Instant?
    private var reportFailures = 0
    /// Whether the wall clock can be trusted (`WallClock.isTrusted`): device status and slot status carry
    /// dates, and a board without a clock starts in 1970, so nothing is sent until it is set.
    private let clockTrusted: @Sendable () -> Bool
    private var waitingForClock = false
    /// When a press last made the agent ask DRS about subscriptions again.
    private var lastRecheck: C.Instant?

    init(
        drs: DRSSession, tokens: TokenManager<C>, status: StatusBook, slots: [String], clock: C,
        wallTime: @escaping @Sendable () -> Double, clockTrusted: @escaping @Sendable () -> Bool = { true },
        logger: Logger
    ) {
        self.clockTrusted = clockTrusted
        self.drs = drs
        self.tokens = tokens
        self.status = status
        self.slots = slots
        self.clock = clock
        self.wallTime = wallTime
        self.logger = logger
    }

    /// The device was just paired (or re-paired): report now.
    func pairingChanged() {
        dueAt = nil
        waker.ring()
    }

    /// Queues a slot-status report (sent with retries; the newest report per slot wins).
    func reportSlotStatus(slot: String, report: SlotStatusReport) {
        reports.removeAll { $0.slot == slot }
        reports.append((slot, report))
        reportsNotBefore = nil
        waker.ring()
    }

    func run() async {
        // A fleet that lost power together comes back in the same second: each device sends its first duties
        // at its own random moment of the start-up window (still within the 30 s CONTRACT.md promises).
        dueAt = clock.now.advanced(by: DutySchedule.startupDelay(using: &random))
        while !Task.isCancelled {
            guard await tokens.isPaired else {
                await waker.wait(timeout: nil, clock: clock)
                continue
            }
            // Until the clock is set, look again every two seconds (a timer only while it is not).
            guard clockTrusted() else {
                if !waitingForClock {
                    logger.notice("the wall clock is not set yet; device and slot status wait for it")
                    waitingForClock = true
                }
                await waker.wait(timeout: .seconds(2), clock: clock)
                continue
            }
            if waitingForClock {
                logger.notice("the wall clock is set; sending device status")
                waitingForClock = false
                dueAt = nil
            }
            if let first = reports.first, reportsNotBefore.map({ $0 <= clock.now }) ?? true {
                await send(first.slot, first.report)
                continue
            }
            let next = [dueAt, reports.isEmpty ? nil : reportsNotBefore].compactMap { $0 }.min()
            if dueAt != nil, let next, clock.now < next {
                await waker.wait(timeout: clock.now.duration(to: next), clock: clock)
                continue
            }
            do {
                try await perform()
                failures = 0
                dueAt = clock.now.advanced(by: DutySchedule.dailyDelay(using: &random))
            } catch {
                failures += 1
                let delay = DutySchedule.retryDelay(after: error, attempt: failures, using: &random)
                logger.warning(
                    "device duties failed; will retry",
                    metadata: [
                        "error.code": "\(error.code)", "error": "\(error.message)",
                        "duty.retryIn": "\(delay.components.seconds)s",
                    ])
                dueAt = clock.now.advanced(by: delay)
            }
        }
    }

    private func send(_ slot: String, _ report: SlotStatusReport) async {
        do throws(AgentError) {
            try await drs.sendExpectingSuccess(.slotStatus(slot: slot, report: report))
            reports.removeAll { $0.slot == slot && $0.report == report }
            reportFailures = 0
            logger.info("slot status sent", metadata: ["order.slot": "\(slot)"])
        } catch {
            reportFailures += 1
            reportsNotBefore = clock.now.advanced(
                by: DutySchedule.retryDelay(after: error, attempt: reportFailures, using: &random))
            logger.warning(
                "slot status failed; will retry", metadata: ["order.slot": "\(slot)", "error": "\(error.message)"])
        }
    }

    private func perform() async throws(AgentError) {
        let now = wallTime()
        try await drs.sendExpectingSuccess(.deviceStatus(mostRecentlyActive: now))
        logger.info("device status sent")
        try await status.update { $0.lastDeviceStatusAt = now }
        try await checkSubscriptions()
    }

    /// Asks DRS which slots are subscribed (and to what) and records it; presses for an unsubscribed slot are
    /// refused at the button until a check finds it subscribed.
    private func checkSubscriptions() async throws(AgentError) {
        let answer = try await drs.sendExpectingSuccess(.subscriptionInfo)
        let info = try SubscriptionInfo.decode(answer.body)
        let (slots, now) = (slots, wallTime())
        try await status.update { record in
            record.lastSubscriptionCheckAt = now
            for slot in slots {
                let known = info.slots[slot]
                record.slots[slot, default: .init()].subscribed = known?.subscribed ?? false
                record.slots[slot, default: .init()].products =
                    known.map { $0.products.isEmpty ? nil : $0.products } ?? nil
            }
        }
        logger.info(
            "subscriptions checked",
            metadata: ["drs.subscribed": "\(slots.filter { info.slots[$0]?.subscribed == true }.count)/\(slots.count)"])
    }

    /// A press for a slot marked unsubscribed: the customer may have subscribed since the last check, so ask
    /// DRS again, at most once a minute (a child pressing the button again and again is not a stream of
    /// calls). Returns the slot's subscription as now known, or nil when no check could be made.
    func recheckSubscription(slot: String) async -> Bool? {
        if let last = lastRecheck, clock.now < last.advanced(by: Self.recheckSpacing) { return nil }
        // The spacing counts from the attempt: a failing DRS is not asked again on every press either.
        lastRecheck = clock.now
        do throws(AgentError) {
            try await checkSubscriptions()
            return await status.subscribed(slot)
        } catch {
            logger.warning(
                "subscription re-check failed", metadata: ["order.slot": "\(slot)", "error": "\(error.message)"])
            return nil
        }
    }

    static var recheckSpacing: Duration { .seconds(60) }
}

extension Duties {
    /// A new pairing makes the duties due at once.
    nonisolated func follow(tokens: AsyncStream<TokenEvent>) async {
        for await case .paired in tokens { await pairingChanged() }
    }
}
