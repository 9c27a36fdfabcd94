import FoundationEssentials

/// `GET /subscriptionInfo`: the agent asks for `@2.0` (each slot with its products) and reads `@1.0` too
/// (slot → subscribed), whichever DRS sends.
struct SubscriptionInfo: Decodable, Sendable, Equatable {
    var slots: [String: Slot]

    struct Slot: Decodable, Sendable, Equatable {
        var subscribed: Bool
        /// Empty from `@1.0`.
        var products: [Product] = []

        init(subscribed: Bool, products: [Product] = []) {
            self.subscribed = subscribed
            self.products = products
        }

        init(from decoder: any Decoder) throws {
            // @1.0: a bare boolean.
            if let subscribed = try? decoder.singleValueContainer().decode(Bool.self) {
                self.init(subscribed: subscribed)
                return
            }
            // @2.0: `{"subscribed": Bool, "productInfoList": [...]}`.
            enum Keys: String, CodingKey {
                case subscribed
                case productInfoList
            }
            let container = try decoder.container(keyedBy: Keys.self)
            self.init(
                subscribed: try container.decode(Bool.self, forKey: .subscribed),
                products: try container.decodeIfPresent([Product].self, forKey: .productInfoList) ?? [])
        }
    }

    /// What the customer subscribed the slot to: a product (ASIN) and how much of it one order brings.
    struct Product: Codable, Sendable, Equatable {
        var asin: String
        var quantity: Double?
        var unit: String?
    }

    private enum CodingKeys: String, CodingKey { case slotsSubscriptionStatus }

    init(slots: [String: Slot]) { self.slots = slots }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        slots = try container.decode([String: Slot].self, forKey: .slotsSubscriptionStatus)
    }

    /// The answer's body, or a clear error (never a crash) for anything else.
    static func decode(_ body: [UInt8]) throws(AgentError) -> SubscriptionInfo {
        do { return try JSONDecoder().decode(SubscriptionInfo.self, from: Data(body)) } catch {
            throw AgentError(.server, "subscriptionInfo answer is unreadable")
        }
    }
}
