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
struct TokenPairing: Sendable, Equatable {
    var pairingId: String?
    var hasUsableAccessToken: Bool
}

extension TokenManager: AccessTokens {}

/// The one way the agent talks to DRS: every call goes through here, and `DRSClient` has no other caller. A call
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

    /// Exactly one request with `token` (`DRSClient.send`); nothing is retried here.
    func sendOnce(_ call: DRSClient.Call, token: Secret) async throws(AgentError) -> HTTPResponse {
        try await client.send(call, token: token)
    }
}
