import Foundation

/// An order placed by a replenish call, as `getOrderInfo` reports it.
struct PlacedOrder: Sendable, Codable {
    /// Where the order is in its life; only `processing` blocks a new order for the slot.
    enum Status: String, Sendable, Codable {
        case processing = "Processing"
        case shipped = "Shipped"
        case cancelled = "Cancelled"
    }

    var eventInstanceId: String
    var deviceKey: String
    var slotId: String
    var placedAt: Date
    var status: Status = .processing
}
