import FoundationEssentials

/// The DRS device API calls, with the exact version headers docs/protocol.md lists. It returns the raw answer;
/// what an answer means for an order is decided by `DeliveryPolicy`.
struct DRSClient: Sendable {
    static let prefix = "com.amazon.dash.replenishment."

    let http: any HTTPClient
    let baseURL: EndpointURL

    func replenish(slot: String, token: Secret) async throws(AgentError) -> HTTPResponse {
        try await call(
            .post, "/replenish/\(slot)", input: "DrsReplenishInput@1.0", accept: "DrsReplenishResult@1.0",
            token: token)
    }

    func deviceStatus(mostRecentlyActive: Double, token: Secret) async throws(AgentError) -> HTTPResponse {
        struct Body: Encodable { var mostRecentlyActiveDate: String }
        let body = try Self.encode(Body(mostRecentlyActiveDate: ISO8601.format(mostRecentlyActive)))
        return try await call(
            .post, "/deviceStatus", input: "DrsDeviceStatusInput@1.0",
            accept: "DrsDeviceStatusResult@1.0", token: token, json: body)
    }

    /// Reports a slot's contents after consumption (a press that ordered, or a level sensor found it low).
    /// `totalQuantityOnHand` (what the household holds beyond the unit in the slot) is left out: the device
    /// cannot know it, and sending the remaining quantity as that total would tell DRS something untrue.
    func slotStatus(slot: String, report: SlotStatusReport, token: Secret) async throws(AgentError) -> HTTPResponse {
        struct Body: Encodable {
            var expectedReplenishmentDate: String
            var remainingQuantityInUnit: Double
            var originalQuantityInUnit: Double
            var lastUseDate: String
        }
        let body = try Self.encode(
            Body(
                expectedReplenishmentDate: ISO8601.format(report.expectedReplenishment),
                remainingQuantityInUnit: report.remaining, originalQuantityInUnit: report.original,
                lastUseDate: ISO8601.format(report.lastUse)))
        return try await call(
            .post, "/slotStatus/\(slot)", input: "DrsSlotStatusInput@1.0", accept: "DrsSlotStatusResult@1.0",
            token: token, json: body)
    }

    /// A request body through `JSONEncoder` (never joined by hand); a value JSON cannot hold (a non-finite
    /// quantity) is refused here rather than sent.
    private static func encode<T: Encodable>(_ body: T) throws(AgentError) -> [UInt8] {
        do { return Array(try JSONEncoder().encode(body)) } catch {
            throw AgentError(.invalidInput, "cannot encode the request body: \(error)")
        }
    }

    /// Asks for `@2.0` (products and quantities per slot); `SubscriptionInfo` reads `@1.0` as well.
    func subscriptionInfo(token: Secret) async throws(AgentError) -> HTTPResponse {
        try await call(
            .get, "/subscriptionInfo", input: "DrsSubscriptionInfoInput@1.0",
            accept: "DrsSubscriptionInfoResult@2.0", token: token)
    }

    /// What DRS says of one of the device's orders.
    func orderInfo(eventInstanceId: String, token: Secret) async throws(AgentError) -> HTTPResponse {
        try await call(
            .get, "/getOrderInfo/\(CurlEasy.formEscape(eventInstanceId))", input: "DrsOrderInfoInput@1.0",
            accept: "DrsOrderInfoResult@1.0", token: token)
    }

    /// Cancels the device's test orders: one slot's (`DELETE /testOrders/slots/{slotId}`) or all
    /// (`DELETE /testOrders`).
    func cancelTestOrders(slot: String?, token: Secret) async throws(AgentError) -> HTTPResponse {
        try await call(
            .delete, slot.map { "/testOrders/slots/\($0)" } ?? "/testOrders", input: "DrsCancelTestOrdersInput@1.0",
            accept: "DrsCancelTestOrdersResult@1.0", token: token)
    }

    func deregister(token: Secret) async throws(AgentError) -> HTTPResponse {
        try await call(
            .delete, "/registration", input: "DrsDeregisterInput@2.0", accept: "DrsDeregisterResult@1.0",
            token: token)
    }

    private func call(
        _ method: HTTPRequest.Method, _ path: String, input: String, accept: String, token: Secret,
        json: [UInt8]? = nil
    ) async throws(AgentError) -> HTTPResponse {
        var headers = [
            ("Authorization", "Bearer \(token.value)"),
            ("x-amzn-type-version", Self.prefix + input),
            ("x-amzn-accept-type", Self.prefix + accept),
        ]
        if json != nil { headers.append(("Content-Type", "application/json")) }
        return try await http.send(
            HTTPRequest(
                method: method, url: baseURL.appending(path), headers: headers,
                body: json, timeoutSeconds: 30))
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
