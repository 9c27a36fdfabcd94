import FoundationEssentials

/// Where a DRS call's access token comes from: the pairing's `TokenManager`, or the old pairing's refresh token
/// that a queued deregistration keeps (`DeregistrationQueue`).
protocol AccessTokens: Sendable {
    /// A token to call with (refreshed first when it is expired or about to be).
    func accessToken() async throws(AgentError) -> Secret
    /// DRS rejected `rejected`: a new one (refreshed now, unless another caller already replaced it).
    func accessTokenReplacing(_ rejected: Secret) async throws(AgentError) -> Secret
    /// The pairing the tokens belong to, nil when there is none: what a press is accepted under.
    func pairing() async -> TokenPairing?
}

/// What the delivery loop knows of the pairing: its tag (stamped on each press), and whether an access token is
/// at hand now (a press's call then leaves at once, `DeliveryLoop.accept`).
struct TokenPairing: Sendable {
    var pairingId: String?
    var hasUsableAccessToken: Bool
}

extension TokenManager: AccessTokens {}

/// The one way the agent talks to DRS: every call's request is made here (`sendOnce`; `DRSClient`'s fields are
/// private to this file, so the compiler keeps it so). A call
/// takes the current access token; when DRS (or a gateway in front of it) rejects that token, the token is
/// refreshed once and the call made once more, and that answer is the call's (a second rejection is not
/// refreshed again: LWA would only be asked in a loop). What an answer means is the caller's: an order's answer
/// goes to `DeliveryPolicy`, a duty's to `requireSuccess`, whose error carries the server's `Retry-After`.
///
/// A replenish is the exception in one way: each of its tries is made durable in the outbox before it leaves
/// (`DeliveryLoop`), so it takes its token from `tokens` (the pairing, a token, one refresh after a rejection) and
/// makes each try itself (`sendOnce`), with the same one-refresh rule in `DeliveryPolicy`.
struct DRSSession: Sendable {
    let client: DRSClient
    let tokens: any AccessTokens

    /// The call with the current token, and once more after one refresh when DRS rejected it.
    func send(_ call: DRSClient.Call) async throws(AgentError) -> HTTPResponse {
        let token = try await tokens.accessToken()
        let answer = try await sendOnce(call, token: token)
        guard DRSClient.isTokenRejection(answer) else { return answer }
        return try await sendOnce(call, token: try await tokens.accessTokenReplacing(token))
    }

    /// `send`, then any answer but a 2xx is an error that says which call it was and carries `Retry-After`.
    @discardableResult
    func sendExpectingSuccess(_ call: DRSClient.Call) async throws(AgentError) -> HTTPResponse {
        let answer = try await send(call)
        try Self.requireSuccess(answer, of: call)
        return answer
    }

    /// The error for an answer that is not a 2xx: the call's name and status, and the server's `Retry-After`
    /// (no retry of the caller's comes sooner).
    static func requireSuccess(_ answer: HTTPResponse, of call: DRSClient.Call) throws(AgentError) {
        guard !(200..<300).contains(answer.status) else { return }
        let rejected = DRSClient.isTokenRejection(answer) ? ": DRS rejected the access token" : ""
        throw AgentError(.server, "\(call.name) answered \(answer.status)\(rejected)", retryAfter: answer.retryAfter)
    }

    /// Exactly one request of `call` with `token`, nothing retried: its endpoint, its version headers and its
    /// body; DRS's answer as it came.
    func sendOnce(_ call: DRSClient.Call, token: Secret) async throws(AgentError) -> HTTPResponse {
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
            ("x-amzn-type-version", DRSClient.prefix + input),
            ("x-amzn-accept-type", DRSClient.prefix + accept),
        ]
        if json != nil { headers.append(("Content-Type", "application/json")) }
        return try await client.http.send(
            HTTPRequest(
                method: method, url: client.baseURL.appending(path), headers: headers, body: json, timeoutSeconds: 30))
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
}

/// DRS's endpoint: the base URL and the HTTP client (the `drs-lane`). Its fields are private to this file, so
/// `DRSSession` is the one maker of a DRS request.
struct DRSClient: Sendable {
    static let prefix = "com.amazon.dash.replenishment."

    fileprivate let http: any HTTPClient
    fileprivate let baseURL: EndpointURL

    init(http: any HTTPClient, baseURL: EndpointURL) {
        self.http = http
        self.baseURL = baseURL
    }
}
