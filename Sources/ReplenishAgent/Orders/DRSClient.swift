import FoundationEssentials

/// Where DRS is (its base URL and the HTTP client that reaches it) and its device API calls as values. Only
/// `DRSSession` makes a request of it: its fields are private to `DRSSession.swift`, which builds each call's
/// request with the exact version headers docs/protocol.md lists.
extension DRSClient {
    /// The DRS device API calls (docs/protocol.md), as values.
    enum Call: Sendable {
        case replenish(slot: String)
        case deviceStatus(mostRecentlyActive: Double)
        /// A slot's contents after consumption (a press that ordered, or a level sensor found it low).
        case slotStatus(slot: String, report: SlotStatusReport)
        case subscriptionInfo
        /// What DRS says of one of the device's orders.
        case orderInfo(eventInstanceId: String)
        /// The device's test orders: one slot's, or all (nil).
        case cancelTestOrders(slot: String?)
        case deregister

        /// The operation's name in errors and logs.
        var name: String {
            switch self {
            case .replenish: "replenish"
            case .deviceStatus: "deviceStatus"
            case .slotStatus: "slotStatus"
            case .subscriptionInfo: "subscriptionInfo"
            case .orderInfo: "getOrderInfo"
            case .cancelTestOrders: "cancelTestOrders"
            case .deregister: "deregister"
            }
        }
    }

    /// True when DRS (or a gateway in front of it) rejected the access token.
    static func isTokenRejection(_ response: HTTPResponse) -> Bool {
        if response.status == 401 || response.status == 403 { return true }
        guard response.status == 400 else { return false }
        // `InvalidTokenException:…` is what DRS documents; an expired-token variant or a gateway's own wording
        // must not park a press either: any error type or message about the token means "refresh and retry".
        if let type = response.header("x-amzn-errortype")?.lowercased(), type.containsText("token") { return true }
        let message = (try? JSONDecoder().decode(DRSMessage.self, from: Data(response.body)))?.message?.lowercased()
        return message.map { $0.containsText("token") && ($0.containsText("invalid") || $0.containsText("expired")) }
            ?? false
    }
}

/// ISO 8601 date-times with a zone, as DRS wants them (`2015-12-21T10:00:00Z`).
enum ISO8601 {
    /// `epochSeconds` outside 1970 to 9999 (a damaged state file) prints as `invalid time`.
    static func format(_ epochSeconds: Double) -> String {
        guard (0...253_402_300_799).contains(epochSeconds) else { return "invalid time" }
        return POSIX.utcText(Int64(epochSeconds.rounded(.down)), format: "%Y-%m-%dT%H:%M:%SZ") ?? "invalid time"
    }
}

/// A slot's contents after a consumption (`ConsumptionRate.report`): quantities in the slot's configured unit,
/// or in the unit "refill" (remaining 0 of 1) when the config names none.
struct SlotStatusReport: Sendable, Equatable, Codable {
    var remaining: Double = 0
    var original: Double = 1
    var lastUse: Double
    var expectedReplenishment: Double
}
