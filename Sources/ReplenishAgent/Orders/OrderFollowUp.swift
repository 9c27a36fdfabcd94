import FoundationEssentials

/// What DRS says of a placed order (`GET /getOrderInfo/{eventInstanceId}`) and when to ask again: gently (every
/// few hours, jittered, so a fleet does not ask together) in production, every few minutes in the test and
/// certification phases, where a tester watches each order (test orders in the test phase; real ones, cancelled
/// in the account's order history, in certification: docs/protocol.md). Pure: the service (`OrderTracker`)
/// applies it.
enum OrderFollowUp {
    /// The wait before the next question about an open order.
    static func delay<R: RandomNumberGenerator>(phase: AgentConfig.Phase, using random: inout R) -> Duration {
        switch phase {
        case .production: .seconds(Int64.random(in: 5 * 3600...7 * 3600, using: &random))
        case .test, .certification: .seconds(Int64.random(in: 120...180, using: &random))
        }
    }

    /// An order in one of these states needs no more questions.
    static func isFinal(_ status: String) -> Bool {
        ["shipped", "delivered", "cancelled", "canceled", "closed"].contains(status.lowercased())
    }

    /// The order's status for `slot` from a `getOrderInfo` answer (the item of that slot, or the only one).
    static func status(fromAnswer body: [UInt8], slot: String) throws(AgentError) -> String {
        struct Answer: Decodable {
            struct Data: Decodable { var orderItems: [Item] }
            struct Item: Decodable {
                var slotId: String?
                var status: String
            }
            var orderInfoData: Data
        }
        guard let answer = try? JSONDecoder().decode(Answer.self, from: Data(body)) else {
            throw AgentError(.server, "getOrderInfo answer is unreadable")
        }
        let items = answer.orderInfoData.orderItems
        guard let item = items.first(where: { $0.slotId == slot }) ?? (items.count == 1 ? items.first : nil),
            !item.status.isEmpty, item.status.utf8.count <= 64
        else { throw AgentError(.server, "getOrderInfo names no order item for slot \(slot)") }
        return LWAClient.sanitize(item.status)
    }
}
