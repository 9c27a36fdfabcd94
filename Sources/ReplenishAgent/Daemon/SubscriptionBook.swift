import FoundationEssentials

/// What DRS said of the account's subscriptions, and when the duties last ran, for the device's decisions after a
/// restart and for `status`: whether each slot is subscribed and to what (`Subscriptions`), and when device status
/// was last sent and the subscriptions last checked. Kept in `status.json` of the state directory, replaced atomically on the disk
/// lane. The slots' orders are `OrderBook`'s (`outbox.json`); what only the running daemon shows (the token state,
/// the pairing window, the linking code) is `ShownStatus`.
///
/// Format (see `StateFormat` for the rule): version 1, every field optional. The first builds wrote a
/// `lastError` field that later ones dropped; it is ignored like any field this build does not know.
struct SubscriptionRecord: Codable, Sendable, Equatable, StateFormat {
    static let formatVersion = 1

    struct Slot: Codable, Sendable, Equatable {
        var subscribed: Bool?
        /// What the slot is subscribed to (`subscriptionInfo` @2.0), as of the last check.
        var products: [SubscriptionInfo.Product]?
    }

    var version = SubscriptionRecord.formatVersion
    var slots: [String: Slot] = [:]
    var lastDeviceStatusAt: Double?
    var lastSubscriptionCheckAt: Double?
    // Earlier builds kept the token state, the pairing window and the linking code here too (they are
    // `ShownStatus` now, in the runtime directory, and ignored here), and each slot's orders and the order
    // history (`SlotOrders` and `Outbox.orders` now, in `outbox.json`; a start moves them, `LegacyOrders`).
}

extension SubscriptionRecord {
    /// The device left the customer's account (`deregister`): what DRS said of this account's slots no longer
    /// holds.
    mutating func forgetAccount() {
        for slot in slots.keys {
            slots[slot]?.subscribed = nil
            slots[slot]?.products = nil
        }
    }
}

/// The order facts that `status.json` held in earlier builds, read once to move them into `outbox.json`.
struct LegacyOrders: Decodable, Sendable {
    var slots: [String: SlotOrders]?
    var orders: [OrderRecord]?

    var isEmpty: Bool { (slots ?? [:]).values.allSatisfy(\.isEmpty) && (orders ?? []).isEmpty }

    /// What `status.json` of `stateDirectory` still holds of them; nil when nothing (or no readable file).
    static func read(
        stateDirectory: String, owner: UserID = POSIX.effectiveUserID(), on lane: borrowing DiskLane.Context
    ) -> LegacyOrders? {
        guard
            case .read(let bytes)? = try? StateStore<SubscriptionRecord>.subscriptionRecord(
                stateDirectory: stateDirectory
            ).readBytes(
                on: lane, owner: owner),
            let legacy = try? JSONDecoder().decode(LegacyOrders.self, from: Data(bytes)), !legacy.isEmpty
        else { return nil }
        return legacy
    }
}

extension Outbox {
    /// An outbox written by an earlier build knows no orders: it takes those `status.json` still holds. True when it
    /// took any (the caller writes it, or shows it).
    @discardableResult
    mutating func adoptLegacyOrders(
        stateDirectory: String, owner: UserID = POSIX.effectiveUserID(), on lane: borrowing DiskLane.Context
    ) -> Bool {
        guard slots.isEmpty, orders == nil,
            let legacy = LegacyOrders.read(stateDirectory: stateDirectory, owner: owner, on: lane)
        else { return false }
        slots = (legacy.slots ?? [:]).filter { !$0.value.isEmpty }
        orders = legacy.orders
        return true
    }
}

/// The daemon's single writer of `status.json`: each fact is changed through a method named for what happened,
/// called from the one file that owns that fact; `update` stays private.
final actor SubscriptionBook {
    private let store: StateStore<SubscriptionRecord>
    private(set) var record: SubscriptionRecord
    /// One change at a time across its write (`DiskLane`).
    private let turns = WriteTurns()

    /// Loads the record at the daemon's start (before its loop serves); a file that cannot be used is moved aside
    /// and `onCorrupt` told.
    init(
        store: StateStore<SubscriptionRecord>, onCorrupt: (String) -> Void, loadingOn lane: borrowing DiskLane.Context
    ) throws(AgentError) {
        self.store = store
        record = try store.load(on: lane, onCorrupt: onCorrupt) ?? SubscriptionRecord()
    }

    /// Over `status.json` of `stateDirectory` (`StateStore.subscriptionRecord`).
    init(stateDirectory: String, onCorrupt: (String) -> Void, loadingOn lane: borrowing DiskLane.Context)
        throws(AgentError)
    {
        try self.init(store: .subscriptionRecord(stateDirectory: stateDirectory), onCorrupt: onCorrupt, loadingOn: lane)
    }

    static func path(stateDirectory: String) -> String { POSIX.join(stateDirectory, "status.json") }

    // MARK: Subscriptions (Subscriptions)

    /// DRS refused an order of `slot` as not subscribed.
    func recordNotSubscribed(slot: String) async throws(AgentError) {
        try await update { $0.slots[slot, default: .init()].subscribed = false }
    }

    /// DRS said which of `slots` are subscribed (`info`), at `time`.
    func recordSubscriptions(_ info: SubscriptionInfo, slots: [String], at time: Double) async throws(AgentError) {
        try await update { record in
            record.lastSubscriptionCheckAt = time
            for slot in slots {
                let known = info.slots[slot]
                record.slots[slot, default: .init()].subscribed = known?.subscribed ?? false
                record.slots[slot, default: .init()].products =
                    known.map { $0.products.isEmpty ? nil : $0.products } ?? nil
            }
        }
    }

    // MARK: Duties (Duties)

    /// Device status was sent at `time`.
    func recordDeviceStatus(at time: Double) async throws(AgentError) {
        try await update { $0.lastDeviceStatusAt = time }
    }

    // MARK: Reset (FactoryReset)

    /// Factory reset: everything the device knew about its slots and duties is forgotten.
    func wipe() async throws(AgentError) {
        await turns.take()
        defer { turns.release() }
        try await store.shred()
        record = SubscriptionRecord()
    }

    /// The device left the customer's account: what DRS said of its slots no longer holds.
    func forgetAccount() async throws(AgentError) { try await update { $0.forgetAccount() } }

    private func update(_ change: (inout SubscriptionRecord) -> Void) async throws(AgentError) {
        await turns.take()
        defer { turns.release() }
        var next = record
        change(&next)
        guard next != record else { return }
        try await store.save(next)
        record = next
    }
}

extension StateStore<SubscriptionRecord> {
    /// `status.json` of the state directory, on the daemon's lane; its one owner is `SubscriptionBook`.
    static func subscriptionRecord(stateDirectory: String) -> Self {
        // A write given up at a stop (`StopBound`) leaves the record as it was: the duties run again.
        StateStore(path: SubscriptionBook.path(stateDirectory: stateDirectory), boundedAtStop: true)
    }
}
