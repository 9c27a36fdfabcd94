import FoundationEssentials
import Logging

/// The duties DRS asks of a paired device besides ordering: device status within 30 seconds of pairing or
/// start, then daily; the subscription of each slot at the same times (so presses for an unsubscribed slot
/// are refused at the button). Failures retry with backoff.
actor Duties<C: Clock> where C.Duration == Duration {
    static var interval: Duration { .seconds(24 * 3600) }

    private let drs: DRSClient
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

    init(
        drs: DRSClient, tokens: TokenManager<C>, status: StatusBook, slots: [String], clock: C,
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
            let token = try await tokens.accessToken()
            let answer = try await drs.slotStatus(slot: slot, report: report, token: token)
            if DRSClient.isTokenRejection(answer) { _ = try await tokens.accessTokenReplacing(token) }
            guard (200..<300).contains(answer.status) else {
                throw AgentError(.server, "slotStatus answered \(answer.status)")
            }
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
        let token = try await tokens.accessToken()
        let now = wallTime()
        let answer = try await drs.deviceStatus(mostRecentlyActive: now, token: token)
        guard (200..<300).contains(answer.status) else {
            if DRSClient.isTokenRejection(answer) { _ = try await tokens.accessTokenReplacing(token) }
            throw AgentError(.server, "deviceStatus answered \(answer.status)")
        }
        logger.info("device status sent")
        let subscription = try await drs.subscriptionInfo(token: try await tokens.accessToken())
        guard subscription.status == 200 else {
            throw AgentError(.server, "subscriptionInfo answered \(subscription.status)")
        }
        guard let info = try? JSONDecoder().decode(SubscriptionInfo.self, from: Data(subscription.body)) else {
            throw AgentError(.server, "subscriptionInfo answer is unreadable")
        }
        let slots = slots
        try await status.update { record in
            record.lastDeviceStatusAt = now
            record.lastSubscriptionCheckAt = now
            for slot in slots {
                record.slots[slot, default: .init()].subscribed = info.slotsSubscriptionStatus[slot] ?? false
            }
        }
        logger.info(
            "subscriptions checked",
            metadata: [
                "drs.subscribed": "\(slots.filter { info.slotsSubscriptionStatus[$0] == true }.count)/\(slots.count)"
            ])
    }
}

/// `GET /subscriptionInfo` @1.0: slot id → subscribed.
private struct SubscriptionInfo: Decodable {
    var slotsSubscriptionStatus: [String: Bool]
}

extension Duties {
    /// A new pairing makes the duties due at once.
    nonisolated func follow(tokens: AsyncStream<TokenEvent>) async {
        for await case .paired in tokens { await pairingChanged() }
    }
}
