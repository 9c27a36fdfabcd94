/// What the device remembers for `status` beyond tokens and the outbox: per-slot last results and
/// subscription, and when the duties last ran. Kept in `status.json`, replaced atomically.
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
    /// The token lifecycle state (`TokenManager.State.name`) and its reason, as the daemon last saw them.
    var tokenState: TokenState.Kind?
    var tokenStateReason: String?
    /// When the open pairing window closes (wall-clock seconds); nil while it is closed.
    var pairingWindowClosesAt: Double?
    /// Code-based linking: the code the customer can enter, while it can be (added to version 1 as an optional
    /// field: older builds ignore it, files without it read as nil).
    var linking: LinkingCode?
    /// The newest answered replenish calls (`OrderRecord`), newest last, for `replenish-agent orders`.
    var orders: [OrderRecord]?
}

/// The daemon's single writer of `status.json`.
actor StatusBook {
    private let path: String
    private(set) var record: StatusRecord

    init(stateDirectory: String, onCorrupt: (String) -> Void) throws(AgentError) {
        path = Self.path(stateDirectory: stateDirectory)
        record = try StateFile.load(StatusRecord.self, from: path, onCorrupt: onCorrupt) ?? StatusRecord()
    }

    static func path(stateDirectory: String) -> String { POSIX.join(stateDirectory, "status.json") }

    func subscribed(_ slot: String) -> Bool? { record.slots[slot]?.subscribed }

    func sensorOrderedWhileLow(_ slot: String) -> Bool { record.slots[slot]?.sensorOrderedWhileLow == true }

    /// Factory reset: everything the device knew about its slots and duties is forgotten.
    func wipe() throws(AgentError) {
        try POSIX.shred(path)
        record = StatusRecord()
    }

    /// After the daemon stopped: nobody polls for a linking code any more, so `status` must not offer it (the
    /// next start gets a new one). Writes nothing when there is none (companion mode).
    /// The token state `status` shows (never a token): its kind and why.
    func recordTokenState(_ state: TokenState) throws(AgentError) {
        try update { record in
            record.tokenState = state.kind
            record.tokenStateReason = state.reason
        }
    }

    func forgetLinkingCode() {
        try? update { $0.linking = nil }
    }

    func update(_ change: @Sendable (inout StatusRecord) -> Void) throws(AgentError) {
        var next = record
        change(&next)
        guard next != record else { return }
        try StateFile.save(next, to: path)
        record = next
    }
}
