/// What the device remembers beyond tokens and the outbox, for its decisions after a restart and for
/// `status`: per-slot last results, open orders, consumption and subscription, and when the duties last ran.
/// Kept in `status.json` of the state directory, replaced atomically on the disk lane. What only the running
/// daemon shows (the token state, the pairing window, the linking code) is `ShownStatus`.
///
/// Format (see `StateFormat` for the rule): version 1, every field optional. The first builds wrote a
/// `lastError` field that later ones dropped; it is ignored like any field this build does not know.
struct StatusRecord: Codable, Sendable, Equatable, StateFormat {
    static let formatVersion = 1

    struct Slot: Codable, Sendable, Equatable {
        var subscribed: Bool?
        var lastResult: String?
        var lastResultAt: Double?
        var lastEventInstanceId: String?
        /// A level sensor of this slot ordered and no refill has been seen since: a restart while the supply
        /// is still low (its level reads "low" again at start) must not order again.
        var sensorOrderedWhileLow: Bool?
        /// What the slot is subscribed to (`subscriptionInfo` @2.0), as of the last check.
        var products: [SubscriptionInfo.Product]?
        /// The slot's last placed order (`lastEventInstanceId`) is followed with `getOrderInfo` while this is
        /// true; `orderStatus` is DRS's word for it (nil until asked), `orderCheckedAt` when it was asked.
        var orderOpen: Bool?
        var orderStatus: String?
        var orderCheckedAt: Double?
        /// When the slot's contents were consumed (a press or a low level), newest last, at most
        /// `ConsumptionRate.historyLimit`: the expected-replenishment date of slot status comes from them.
        var consumedAt: [Double]?
    }

    var version = StatusRecord.formatVersion
    var slots: [String: Slot] = [:]
    var lastDeviceStatusAt: Double?
    var lastSubscriptionCheckAt: Double?
    // Versions before issue 30 kept the token state, the pairing window and the linking code here too: they are
    // `ShownStatus` now, in the runtime directory, and the fields of an older file are ignored.
    /// The newest answered replenish calls (`OrderRecord`), newest last, for `replenish-agent orders`.
    var orders: [OrderRecord]?
}

/// The daemon's single writer of `status.json`: each fact is changed through a method named for what happened,
/// called from the one file that owns that fact; `update` stays private.
actor StatusBook {
    private let path: String
    private(set) var record: StatusRecord
    /// One change at a time across its write (`DiskLane`).
    private let turns = WriteTurns()

    init(stateDirectory: String, onCorrupt: (String) -> Void) throws(AgentError) {
        path = Self.path(stateDirectory: stateDirectory)
        record = try StateFile.load(StatusRecord.self, from: path, onCorrupt: onCorrupt) ?? StatusRecord()
    }

    static func path(stateDirectory: String) -> String { POSIX.join(stateDirectory, "status.json") }

    func subscribed(_ slot: String) -> Bool? { record.slots[slot]?.subscribed }

    func sensorOrderedWhileLow(_ slot: String) -> Bool { record.slots[slot]?.sensorOrderedWhileLow == true }

    // MARK: Orders (OrderService)

    /// DRS answered a replenish call for `slot` (`StatusRecord.recordAnswer`).
    func recordAnswer(slot: String, detailCode: String, eventInstanceId: String?, at time: Double)
        async throws(AgentError)
    {
        try await update {
            $0.recordAnswer(slot: slot, detailCode: detailCode, eventInstanceId: eventInstanceId, at: time)
        }
    }

    /// DRS refused the slot's order for a reason retrying cannot fix.
    func recordParked(slot: String, reason: String, at time: Double) async throws(AgentError) {
        try await update { record in
            record.slots[slot, default: .init()].lastResult = reason
            record.slots[slot, default: .init()].lastResultAt = time
            if reason == "not subscribed" { record.slots[slot, default: .init()].subscribed = false }
        }
    }

    // MARK: Order follow-up (OrderFollowUpService, TestOrderCancellation)

    /// `getOrderInfo` said `state` of the slot's order `id`.
    func recordFollowUp(slot: String, eventInstanceId id: String, state: String, open: Bool, at time: Double)
        async throws(AgentError)
    {
        try await update { $0.recordFollowUp(slot: slot, eventInstanceId: id, status: state, open: open, at: time) }
    }

    /// DRS cancelled the test orders of `slots`.
    func recordTestOrdersCancelled(slots: [String], at time: Double) async throws(AgentError) {
        try await update { $0.recordTestOrdersCancelled(slots: slots, at: time) }
    }

    // MARK: Presses (PressHandler)

    /// A level sensor's refill was seen: the next low orders again.
    func recordRefill(slot: String) async throws(AgentError) {
        try await update { $0.slots[slot, default: .init()].sensorOrderedWhileLow = nil }
    }

    /// A press for a slot whose order is still open: counted on that order, not sent.
    func recordPressWhileOpen(slot: String, at time: Double) async throws(AgentError) {
        try await update { $0.recordPressWhileOpen(slot: slot, at: time) }
    }

    /// An accepted press consumed the slot's contents (a level sensor's also latches it until a refill).
    func recordConsumption(slot: String, fromSensor: Bool, at time: Double) async throws(AgentError) {
        try await update { record in
            if fromSensor { record.slots[slot, default: .init()].sensorOrderedWhileLow = true }
            record.slots[slot, default: .init()].consumedAt = ConsumptionRate.adding(
                time, to: record.slots[slot]?.consumedAt ?? [])
        }
    }

    // MARK: Duties (Duties)

    /// Device status was sent, and DRS said which slots are subscribed (`info`), at `time`: one write.
    func recordDuties(deviceStatusAt: Double?, subscriptions info: SubscriptionInfo?, slots: [String], at time: Double)
        async throws(AgentError)
    {
        try await update { record in
            if let deviceStatusAt { record.lastDeviceStatusAt = deviceStatusAt }
            guard let info else { return }
            record.lastSubscriptionCheckAt = time
            for slot in slots {
                let known = info.slots[slot]
                record.slots[slot, default: .init()].subscribed = known?.subscribed ?? false
                record.slots[slot, default: .init()].products =
                    known.map { $0.products.isEmpty ? nil : $0.products } ?? nil
            }
        }
    }

    // MARK: Reset (FactoryReset)

    /// Factory reset: everything the device knew about its slots and duties is forgotten.
    func wipe() async throws(AgentError) {
        await turns.take()
        defer { turns.release() }
        try await DiskLane.shared.shred(path)
        record = StatusRecord()
    }

    /// The device left the customer's account (`StatusRecord.forgetAccount`).
    func forgetAccount() async throws(AgentError) { try await update { $0.forgetAccount() } }

    private func update(_ change: (inout StatusRecord) -> Void) async throws(AgentError) {
        await turns.take()
        defer { turns.release() }
        var next = record
        change(&next)
        guard next != record else { return }
        try await DiskLane.shared.save(next, to: path)
        record = next
    }
}
