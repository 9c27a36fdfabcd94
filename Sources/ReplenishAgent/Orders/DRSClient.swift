import FoundationEssentials

/// The DRS device API calls, with the exact version headers docs/protocol.md lists. It returns the raw answer;
/// what an answer means for an order is decided by `DeliveryPolicy`.
struct DRSClient: Sendable {
    static let prefix = "com.amazon.dash.replenishment."

    let http: any HTTPClient
    let baseURL: EndpointURL

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

    /// Exactly one request of `call` with `token`, nothing retried: its endpoint, its version headers and its
    /// body; DRS's answer as it came.
    func send(_ call: Call, token: Secret) async throws(AgentError) -> HTTPResponse {
        let method: HTTPRequest.Method
        let path: String
        let (input, accept): (String, String)
        var json: [UInt8]?
        switch call {
        case .replenish(let slot):
            (method, path) = (.post, "/replenish/\(slot)")
            (input, accept) = ("DrsReplenishInput@1.0", "DrsReplenishResult@1.0")
        case .deviceStatus(let mostRecentlyActive):
            (method, path) = (.post, "/deviceStatus")
            (input, accept) = ("DrsDeviceStatusInput@1.0", "DrsDeviceStatusResult@1.0")
            json = try Self.encode(DeviceStatusBody(mostRecentlyActiveDate: ISO8601.format(mostRecentlyActive)))
        case .slotStatus(let slot, let report):
            (method, path) = (.post, "/slotStatus/\(slot)")
            (input, accept) = ("DrsSlotStatusInput@1.0", "DrsSlotStatusResult@1.0")
            json = try Self.encode(SlotStatusBody(report))
        case .subscriptionInfo:
            // `@2.0`: products and quantities per slot (`SubscriptionInfo` reads `@1.0` as well).
            (method, path) = (.get, "/subscriptionInfo")
            (input, accept) = ("DrsSubscriptionInfoInput@1.0", "DrsSubscriptionInfoResult@2.0")
        case .orderInfo(let id):
            (method, path) = (.get, "/getOrderInfo/\(CurlEasy.formEscape(id))")
            (input, accept) = ("DrsOrderInfoInput@1.0", "DrsOrderInfoResult@1.0")
        case .cancelTestOrders(let slot):
            // `DELETE /testOrders/slots/{slotId}`, or `DELETE /testOrders` for all.
            (method, path) = (.delete, slot.map { "/testOrders/slots/\($0)" } ?? "/testOrders")
            (input, accept) = ("DrsCancelTestOrdersInput@1.0", "DrsCancelTestOrdersResult@1.0")
        case .deregister:
            (method, path) = (.delete, "/registration")
            (input, accept) = ("DrsDeregisterInput@2.0", "DrsDeregisterResult@1.0")
        }
        var headers = [
            ("Authorization", "Bearer \(token.value)"),
            ("x-amzn-type-version", Self.prefix + input),
            ("x-amzn-accept-type", Self.prefix + accept),
        ]
        if json != nil { headers.append(("Content-Type", "application/json")) }
        return try await http.send(
            HTTPRequest(
                method: method, url: baseURL.appending(path), headers: headers, body: json, timeoutSeconds: 30))
    }

    private struct DeviceStatusBody: Encodable { var mostRecentlyActiveDate: String }

    /// `totalQuantityOnHand` (what the household holds beyond the unit in the slot) is left out: the device cannot
    /// know it, and sending the remaining quantity as that total would tell DRS something untrue.
    private struct SlotStatusBody: Encodable {
        var expectedReplenishmentDate: String
        var remainingQuantityInUnit: Double
        var originalQuantityInUnit: Double
        var lastUseDate: String

        init(_ report: SlotStatusReport) {
            expectedReplenishmentDate = ISO8601.format(report.expectedReplenishment)
            remainingQuantityInUnit = report.remaining
            originalQuantityInUnit = report.original
            lastUseDate = ISO8601.format(report.lastUse)
        }
    }

    /// A request body through `JSONEncoder` (never joined by hand); a value JSON cannot hold (a non-finite
    /// quantity) is refused here rather than sent.
    private static func encode<T: Encodable>(_ body: T) throws(AgentError) -> [UInt8] {
        do { return Array(try JSONEncoder().encode(body)) } catch {
            throw AgentError(.invalidInput, "cannot encode the request body: \(error)")
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
