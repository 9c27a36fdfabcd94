/// What the device knows of one slot's orders, for its decisions after a restart and for `status`. Earlier
/// builds kept these fields in `status.json` (`SubscriptionRecord.Slot`), and a start moves them here
/// (`OrderBook.movingLegacyOrders`).
struct SlotOrders: Codable, Sendable, Equatable {
    var lastResult: String?
    var lastResultAt: Double?
    var lastEventInstanceId: String?
    /// A level sensor of this slot ordered and no refill has been seen since: a restart while the supply
    /// is still low (its level reads "low" again at start) must not order again.
    var sensorOrderedWhileLow: Bool?
    /// The slot's last placed order (`lastEventInstanceId`) is followed with `getOrderInfo` while this is
    /// true; `orderStatus` is DRS's word for it (nil until asked), `orderCheckedAt` when it was asked.
    var orderOpen: Bool?
    var orderStatus: String?
    var orderCheckedAt: Double?
    /// When the slot's contents were consumed (a press or a low level), newest last, at most
    /// `ConsumptionRate.historyLimit`: the expected-replenishment date of slot status comes from them.
    var consumedAt: [Double]?

    /// Nothing known.
    var isEmpty: Bool { self == SlotOrders() }
}
