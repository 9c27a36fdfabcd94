import FoundationEssentials
import Logging

/// The duties DRS asks of a paired device besides ordering: device status within 30 seconds of pairing or
/// start, then daily; the subscription of each slot at the same times (`Subscriptions`, so presses for an
/// unsubscribed slot are refused at the button). Failures retry with backoff.
final actor Duties<C: Clock> where C.Duration == Duration {
    static var interval: Duration { .seconds(24 * 3600) }

    private let drs: DRSSession
    private let tokens: TokenManager<C>
    private let subscriptionBook: SubscriptionBook
    /// Checked with device status, at the same times (`Subscriptions.check`).
    private let checkSubscriptions: @Sendable () async throws(AgentError) -> Void
    private let clock: C
    private let wallTime: @Sendable () -> Double
    private let logger: Logger
    private let waker = Waker()
    /// When each duty and slot-status report is due (every timing rule of this service).
    private var timeline: DutyTimeline<C.Instant>
    /// Whether the wall clock can be trusted (`WallClock.isTrusted`): device status and slot status carry
    /// dates, and a board without a clock starts in 1970, so nothing is sent until it is set.
    private let clockTrusted: @Sendable () -> Bool

    init(
        drs: DRSSession, tokens: TokenManager<C>, subscriptionBook: SubscriptionBook,
        checkSubscriptions: @escaping @Sendable () async throws(AgentError) -> Void, clock: C,
        wallTime: @escaping @Sendable () -> Double, clockTrusted: @escaping @Sendable () -> Bool = { true },
        logger: Logger
    ) {
        self.clockTrusted = clockTrusted
        self.drs = drs
        self.tokens = tokens
        self.subscriptionBook = subscriptionBook
        self.checkSubscriptions = checkSubscriptions
        self.clock = clock
        self.wallTime = wallTime
        self.logger = logger
        timeline = DutyTimeline(startedAt: clock.now)
    }

    /// The device was just paired (or re-paired): report now.
    func pairingChanged() {
        timeline.pairingChanged()
        waker.ring()
    }

    /// Queues a slot-status report (sent with retries; the newest report per slot wins).
    func reportSlotStatus(slot: String, report: SlotStatusReport) {
        timeline.queueReport(slot: slot, report: report)
        waker.ring()
    }

    func run() async {
        while !Task.isCancelled { await waker.wait(for: await step(), clock: clock) }
    }

    /// Carries out the timeline's actions until it says wait; returns the wait.
    func step() async -> LoopStep<C.Instant> {
        var worked = false
        while !Task.isCancelled {
            switch timeline.next(at: clock.now, paired: await tokens.isPaired, clockTrusted: clockTrusted()) {
            case .waitForPairing:
                return .wait(until: nil, worked: worked)
            case .waitForClock(let until, let firstTime):
                if firstTime { logger.notice("the wall clock is not set yet; device and slot status wait for it") }
                return .wait(until: until, worked: worked)
            case .clockSet:
                logger.notice("the wall clock is set; sending device status")
            case .sendReport(let slot, let report):
                await send(slot, report)
                worked = true
            case .wait(let until):
                return .wait(until: until, worked: worked)
            case .performDuties:
                worked = true
                do {
                    try await perform()
                    timeline.dutiesDone(at: clock.now)
                } catch {
                    let delay = timeline.dutiesFailed(error, at: clock.now)
                    logger.warning(
                        "device duties failed; will retry",
                        metadata: [
                            "error.code": "\(error.code)", "error": "\(error.message)",
                            "duty.retryIn": "\(delay.components.seconds)s",
                        ])
                }
            }
        }
        return .wait(until: nil, worked: worked)
    }

    private func send(_ slot: String, _ report: SlotStatusReport) async {
        do throws(AgentError) {
            try await drs.sendExpectingSuccess(.slotStatus(slot: slot, report: report))
            timeline.reportSent(slot: slot, report: report)
            logger.info("slot status sent", metadata: ["order.slot": "\(slot)"])
        } catch {
            _ = timeline.reportFailed(error, at: clock.now)
            logger.warning(
                "slot status failed; will retry", metadata: ["order.slot": "\(slot)", "error": "\(error.message)"])
        }
    }

    private func perform() async throws(AgentError) {
        let now = wallTime()
        try await drs.sendExpectingSuccess(.deviceStatus(mostRecentlyActive: now))
        logger.info("device status sent")
        try await subscriptionBook.recordDeviceStatus(at: now)
        try await checkSubscriptions()
    }
}

extension Duties: TokenFollower {
    /// A new pairing makes the duties due at once.
    nonisolated func follow(tokens: AsyncStream<TokenEvent>) async {
        for await case .paired in tokens { await pairingChanged() }
    }
}
