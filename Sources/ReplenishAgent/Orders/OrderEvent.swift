/// What happened to an order, for the LED and the logs.
enum OrderEvent: Sendable {
    case queued(slot: String)
    case retrying(slot: String, network: Bool)
    case acknowledged(slot: String, detailCode: String)
    case parked(slot: String, reason: String)
}

/// An order event and what the followers show of the outbox right after it: the entries waiting to be sent and
/// the ones parked.
struct OrderUpdate: Sendable {
    var event: OrderEvent
    var pending: Int
    var parked: Int
}
