import Logging

/// Whether each slot is subscribed: the one owner of that fact. It asks DRS (`subscriptionInfo` @2.0) when the
/// duties run (daily) and, for a press on a slot recorded unsubscribed, at most once a minute (the customer may
/// have subscribed since: the button works as soon as they have; a child pressing again and again is not a
/// stream of calls); DRS refusing an order as not subscribed tells it too. It records what it learns in
/// `status.json` (`SubscriptionBook.recordSubscriptions`, called from here only).
final actor Subscriptions<C: Clock> where C.Duration == Duration {
    private let drs: DRSSession
    private let subscriptionBook: SubscriptionBook
    private let slots: [String]
    private let clock: C
    private let wallTime: @Sendable () -> Double
    private let logger: Logger
    /// When a press last made the agent ask DRS again (one question answers for every slot).
    private var recheck = PressRecheckLimit<C.Instant, String, Never>()

    init(
        drs: DRSSession, subscriptionBook: SubscriptionBook, slots: [String], clock: C,
        wallTime: @escaping @Sendable () -> Double,
        logger: Logger
    ) {
        (self.drs, self.subscriptionBook, self.slots) = (drs, subscriptionBook, slots)
        (self.clock, self.wallTime, self.logger) = (clock, wallTime, logger)
    }

    /// Asks DRS which slots are subscribed (and to what) and records it (the duties' daily check).
    func check() async throws(AgentError) {
        let answer = try await drs.sendExpectingSuccess(.subscriptionInfo)
        let info = try SubscriptionInfo.decode(answer.body)
        try await subscriptionBook.recordSubscriptions(info, slots: slots, at: wallTime())
        logger.info(
            "subscriptions checked",
            metadata: ["drs.subscribed": "\(slots.filter { info.slots[$0]?.subscribed == true }.count)/\(slots.count)"])
    }

    /// Whether a press for `slot` may order: yes unless the slot is recorded unsubscribed and a re-check (at most
    /// once a minute; within it, or when DRS cannot be asked, the recorded answer stands) does not find it
    /// subscribed now.
    func allowsPress(slot: String) async -> Bool {
        guard await subscriptionBook.record.slots[slot]?.subscribed == false else { return true }
        // The spacing counts from the attempt: a failing DRS is not asked again on every press either.
        guard case .ask = recheck.decide("subscriptions", at: clock.now) else { return false }
        do throws(AgentError) {
            try await check()
        } catch {
            logger.warning(
                "subscription re-check failed", metadata: ["order.slot": "\(slot)", "error": "\(error.message)"])
            return false
        }
        let subscribed = await subscriptionBook.record.slots[slot]?.subscribed == true
        if subscribed {
            logger.notice("the slot is subscribed now; taking the press", metadata: ["order.slot": "\(slot)"])
        }
        return subscribed
    }

    /// DRS refused an order of `slot` as not subscribed: presses are refused at the button until a check finds
    /// it subscribed.
    func refused(slot: String) async {
        do { try await subscriptionBook.recordNotSubscribed(slot: slot) } catch {
            logger.error(
                "could not record that the slot is not subscribed",
                metadata: ["order.slot": "\(slot)", "error": "\(error.message)"])
        }
    }
}
