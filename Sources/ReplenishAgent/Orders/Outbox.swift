/// The durable list of presses not yet acknowledged by DRS, and what DRS answered for each slot (`slots`,
/// `orders`). Pure rules; `OrderBook` writes it to `outbox.json`.
///
/// - At most one entry per slot: a press for a slot that already has one pending is coalesced into it (its
///   time is recorded), because DRS would answer the second with `ORDER_INPROGRESS` anyway.
/// - A parked entry (DRS refused it for a reason retrying cannot fix) stays visible until the customer presses
///   that slot's button again, which replaces it with a fresh pending entry.
/// - The size is bounded by the number of configured slots; the recorded press times of one entry by
///   `maximumPressTimes` (the oldest are dropped: they are only kept for the record).
struct Outbox: Codable, Sendable, Equatable {
    enum Acceptance: Equatable, Sendable { case queued, coalesced }

    static let maximumPressTimes = 16
    /// The attempt count stops growing here (backoff is long capped by then); it never overflows.
    static let maximumAttempts = 1_000_000

    var version = 1
    private(set) var entries: [Entry] = []
    /// What the device knows of each slot's orders (`SlotOrders`): kept with the presses, so that a press and
    /// its answer are each one write of one file (`accept`, `recordAnswer`; `Orders/OrderHistory.swift` says how
    /// follow-ups and refusals change it).
    var slots: [String: SlotOrders] = [:]
    /// The newest answered replenish calls (`OrderRecord`), newest last, for `replenish-agent orders`.
    var orders: [OrderRecord]?

    var pending: [Entry] { entries.filter { !$0.isParked } }
    var parked: [Entry] { entries.filter(\.isParked) }

    func entry(for slot: String) -> Entry? { entries.first { $0.slot == slot } }

    /// A press for `slot` at `time` (wall clock), made under `pairingId`: a new entry (`.queued`), or one more
    /// press time on the slot's pending entry (`.coalesced`). `replacesWaiting`: the slot's entry waits for the
    /// clock (`waitsForClock`: a call of an earlier boot whose answer is unknown): this press, made in this boot,
    /// gets an entry of its own that is sent now instead of being merged into one that may wait a day. Its call
    /// covers both presses: DRS answers `ORDER_INPROGRESS` while the earlier call's order is still on its way, and
    /// places a new one otherwise, as for any press made after an order arrived.
    ///
    /// The press of a new entry, and a level sensor's low (`fromSensor`, which latches the slot until a refill),
    /// consumed the slot's contents: its time joins the slot's consumption times, the oldest dropped past
    /// `ConsumptionRate.historyLimit`. A time earlier than the newest (the wall clock was set back) replaces them:
    /// the rate starts again.
    mutating func accept(
        slot: String, at time: Double, pairingId: String? = nil, replacesWaiting: Bool = false, fromSensor: Bool = false
    ) -> Acceptance {
        let index = entries.firstIndex { $0.slot == slot }
        let kind: Acceptance
        if let index, !entries[index].isParked, entries[index].pairingId == pairingId, !replacesWaiting {
            entries[index].pressedAt = Array((entries[index].pressedAt + [time]).suffix(Self.maximumPressTimes))
            kind = .coalesced
        } else {
            // A parked entry, one pressed under another pairing, or one waiting for the clock gives way to this
            // press (the times of the one waiting are kept for the record).
            var entry = Entry(slot: slot, pressedAt: [time])
            entry.pairingId = pairingId
            if let index {
                if replacesWaiting, !entries[index].isParked, entries[index].pairingId == pairingId {
                    entry.pressedAt = Array((entries[index].pressedAt + [time]).suffix(Self.maximumPressTimes))
                }
                entries[index] = entry
            } else {
                entries.append(entry)
            }
            kind = .queued
        }
        guard kind == .queued || fromSensor else { return kind }
        if fromSensor { slots[slot, default: .init()].sensorOrderedWhileLow = true }
        var times = slots[slot]?.consumedAt ?? []
        if let newest = times.last, time < newest { times = [] }
        slots[slot, default: .init()].consumedAt = Array((times + [time]).suffix(ConsumptionRate.historyLimit))
        return kind
    }

    /// DRS acknowledged the slot's order (`detailCode`, and the order's `eventInstanceId` when it placed one) at
    /// `time`: the entry is done and goes, its call's mark with it; the slot's last result and the history
    /// record the answer, and a new order is followed up until DRS says it is final.
    mutating func recordAnswer(slot: String, detailCode: String, eventInstanceId: String?, at time: Double) {
        entries.removeAll { $0.slot == slot }
        slots[slot, default: .init()].lastResult = detailCode
        slots[slot, default: .init()].lastResultAt = time
        slots[slot, default: .init()].lastEventInstanceId = eventInstanceId
        let placed = eventInstanceId != nil && detailCode.hasSuffix("ORDER_PLACED")
        if placed {
            slots[slot, default: .init()].orderOpen = true
            slots[slot, default: .init()].orderStatus = nil
            slots[slot, default: .init()].orderCheckedAt = nil
        }
        var history = orders ?? []
        history.append(
            OrderRecord(
                slot: slot, detailCode: detailCode, eventInstanceId: eventInstanceId, answeredAt: time, open: placed))
        orders = Array(history.suffix(Self.orderHistoryLimit))
    }

    mutating func recordAttempt(slot: String) {
        if let index = entries.firstIndex(where: { $0.slot == slot }) {
            entries[index].attempts = min(entries[index].attempts + 1, Self.maximumAttempts)
        }
    }

    mutating func park(slot: String, reason: String) {
        if let index = entries.firstIndex(where: { $0.slot == slot }) { entries[index].parkedReason = reason }
    }

    /// A replenish call for `slot` is about to leave at `time` (wall clock) and `uptime` (CLOCK_BOOTTIME), made
    /// by `run`: until an answer comes, DRS may have placed it. An earlier call whose answer is still unknown
    /// keeps its marks: its age is the one that counts (`shownAge`).
    mutating func markSending(slot: String, at time: Double, run: AgentRun = .unknown, uptime: Double? = nil) {
        guard let index = entries.firstIndex(where: { $0.slot == slot }), entries[index].unansweredSince == nil
        else { return }
        entries[index].unansweredSince = time
        entries[index].unansweredBoot = run.boot
        entries[index].unansweredRun = run.id
        entries[index].unansweredUptime = uptime
    }

    /// The call marked by `markSending` certainly never left the device (no connection, no byte sent): the
    /// mark goes back to what it was before (`previous`, an earlier call's unknown answer, or none).
    mutating func unmarkSending(slot: String, previous: Entry) {
        if let index = entries.firstIndex(where: { $0.slot == slot }) {
            entries[index].unansweredSince = previous.unansweredSince
            entries[index].unansweredBoot = previous.unansweredBoot
            entries[index].unansweredRun = previous.unansweredRun
            entries[index].unansweredUptime = previous.unansweredUptime
        }
    }

    /// Whether `entry`'s unanswered call was made in this boot, as far as `run` (the running agent) can know:
    /// by this very run (its id on the mark), or in a boot known on both sides to be this one. A boot that
    /// could not be known (nil, on either side) is no proof: a sandbox that hides the boot id must not make
    /// every boot look like the same. So only a mark loaded from disk can be of an unknown boot.
    static func madeInThisBoot(_ entry: Entry, run: AgentRun) -> Bool {
        if let id = run.id, entry.unansweredRun == id { return true }
        if let boot = run.boot, entry.unansweredBoot == boot { return true }
        return false
    }

    /// Whether `entry`'s unanswered call was made during another (or an unknown) boot while the wall clock is
    /// not known to be synchronised now: its age cannot be judged, so it is not resent until the clock is (or
    /// until it is shown over a day old and parked, `parkStale`).
    static func waitsForClock(_ entry: Entry, run: AgentRun, clockSynchronized: Bool) -> Bool {
        guard entry.unansweredSince != nil, !entry.isParked, !clockSynchronized else { return false }
        return !madeInThisBoot(entry, run: run)
    }

    /// How old `entry`'s unanswered call is shown to be, nil when nothing shows it. A call of this boot stamped
    /// with CLOCK_BOOTTIME: that clock's difference (the wall clock may have stepped since, a restored clock set
    /// right by timesyncd). Otherwise the wall clock's, when both times are plausible: a clock restored from
    /// the last shutdown is only ever behind the true time, so more than a day on it is more than a day.
    static func shownAge(_ entry: Entry, now: Double, run: AgentRun, uptime: Double) -> Double? {
        guard let since = entry.unansweredSince else { return nil }
        if madeInThisBoot(entry, run: run), let stamped = entry.unansweredUptime { return uptime - stamped }
        guard WallClock.isPlausible(since), WallClock.isPlausible(now) else { return nil }
        return now - since
    }

    static let waitingForClockReason =
        "waiting for the wall clock to be synchronised: an answer from before the restart is unknown, and the "
        + "clock may be a restored one"

    /// An answer came for the last call of `slot` (whatever it said): nothing is unknown any more.
    mutating func markAnswered(slot: String) {
        if let index = entries.firstIndex(where: { $0.slot == slot }) { entries[index].unansweredSince = nil }
    }

    static let earlierPairingReason = "pressed under an earlier pairing; press again to order"

    /// How long an unanswered call may be resent: DRS de-duplicates a resend (`ORDER_INPROGRESS`) only while
    /// the first order is still out for delivery, so after a day a resend could order twice.
    static let longestUnansweredResend = 86_400.0

    static let sentOverADayAgoReason =
        "sent over a day ago with no answer (DRS may have placed it); press again to order"

    /// Why `entry` (pending) must not be sent now, nil when it may: its slot is no longer configured; with
    /// `pairingId` (the device is paired), it was pressed under another pairing; or its unanswered call is shown
    /// older than a day.
    ///
    /// The age of a call is `shownAge` (CLOCK_BOOTTIME in the boot it was made in, else the wall clock),
    /// or, for a call of an earlier boot (`waitsForClock`, with `run` and `clockSynchronized`), at least
    /// `sinceBoot`, the time since this boot began (CLOCK_BOOTTIME). So an entry waits for the clock at most
    /// a day of this boot, on a board where nothing ever synchronises it.
    static func parkReason(
        _ entry: Entry, now: Double, configuredSlots: Set<String>, pairingId: String??, run: AgentRun,
        clockSynchronized: Bool, sinceBoot: Double
    ) -> String? {
        if !configuredSlots.contains(entry.slot) { return "slot no longer configured" }
        if case .some(let current) = pairingId, entry.pairingId != current { return earlierPairingReason }
        if let age = shownAge(entry, now: now, run: run, uptime: sinceBoot), age > longestUnansweredResend {
            return sentOverADayAgoReason
        }
        if waitsForClock(entry, run: run, clockSynchronized: clockSynchronized), sinceBoot > longestUnansweredResend {
            return sentOverADayAgoReason
        }
        return nil
    }

    /// Parks every pending entry that must not be sent (`parkReason`). Returns the slots parked, with the reason.
    mutating func parkStale(
        now: Double, configuredSlots: Set<String>, pairingId: String?? = .none, run: AgentRun = .unknown,
        clockSynchronized: Bool = true, sinceBoot: Double = 0
    )
        -> [(slot: String, reason: String)]
    {
        var parked: [(slot: String, reason: String)] = []
        for index in entries.indices where !entries[index].isParked {
            guard
                let reason = Self.parkReason(
                    entries[index], now: now, configuredSlots: configuredSlots, pairingId: pairingId, run: run,
                    clockSynchronized: clockSynchronized, sinceBoot: sinceBoot)
            else { continue }
            entries[index].parkedReason = reason
            parked.append((entries[index].slot, reason))
        }
        return parked
    }
}

extension Outbox {
    enum CodingKeys: String, CodingKey {
        case version, entries, slots, orders
    }

    /// A file edited by hand or damaged in a way JSON still parses could hold two entries for one slot, which
    /// the agent never writes. Every change acts on a slot's first entry, so a second one left pending would be
    /// sent again at once after each answer, forever. They are merged into one, losing no press.
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        version = try container.decode(Int.self, forKey: .version)
        entries = Self.oneEntryPerSlot(try container.decode([Entry].self, forKey: .entries))
        slots = try container.decodeIfPresent([String: SlotOrders].self, forKey: .slots) ?? [:]
        orders = try container.decodeIfPresent([OrderRecord].self, forKey: .orders)
    }

    /// Forgets every queued press (a reset of the pairing): what was answered stays.
    mutating func dropEntries() { entries.removeAll() }

    /// The entries with those of one slot merged, in the order of each slot's first entry: the press still to
    /// send wins over a parked one (it came after the refusal), the press times are joined (the newest
    /// `maximumPressTimes`), the attempt count is the higher, and the earliest call whose answer is unknown is
    /// kept (it may have placed the order, and the resend window counts from it).
    static func oneEntryPerSlot(_ entries: [Entry]) -> [Entry] {
        var merged: [Entry] = []
        for entry in entries {
            guard let index = merged.firstIndex(where: { $0.slot == entry.slot }) else {
                merged.append(entry)
                continue
            }
            let first = merged[index]
            let laterWins = first.isParked && !entry.isParked
            var kept = laterWins ? entry : first
            let other = laterWins ? first : entry
            kept.pressedAt = Array((first.pressedAt + entry.pressedAt).sorted().suffix(maximumPressTimes))
            kept.attempts = max(first.attempts, entry.attempts)
            if let since = other.unansweredSince, since < kept.unansweredSince ?? .infinity {
                kept.unansweredSince = since
                kept.unansweredBoot = other.unansweredBoot
                kept.unansweredRun = other.unansweredRun
                kept.unansweredUptime = other.unansweredUptime
            }
            merged[index] = kept
        }
        return merged
    }
}
