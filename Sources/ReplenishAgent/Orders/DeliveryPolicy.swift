import FoundationEssentials

/// What to do after one replenish attempt. Pure: the answer (or the lack of one) goes in, a decision comes
/// out; `DeliveryLoop` carries it out.
enum DeliveryPolicy {
    enum Decision: Equatable, Sendable {
        /// DRS accepted the press: an order was placed, or one is already in progress (DRS de-duplicated).
        case done(detailCode: String, eventInstanceId: String?)
        /// DRS rejected the access token: refresh it and try once more at once.
        case refreshTokenAndRetry
        /// Transient: try again after at least this long.
        case retry(after: Duration, reason: String)
        /// Retrying cannot help (unknown slot, not subscribed, other 4xx): keep the entry, parked with a reason.
        case park(reason: ParkReason)
    }

    /// Why an entry is parked. The outbox keeps its `text` (what `status` and `orders` show); the agent acts on
    /// the case (`notSubscribed` sends the slot's subscription to be checked again).
    enum ParkReason: Equatable, Sendable {
        case notSubscribed
        case unknownSlot
        case unknownDetailCode(String)
        case refused(status: Int)

        var text: String {
            switch self {
            case .notSubscribed: "not subscribed"
            case .unknownSlot: "DRS does not know this slot (404)"
            case .unknownDetailCode(let code): "DRS answered an unknown detail code \(code)"
            case .refused(let status): "DRS refused the order (\(status))"
            }
        }
    }

    static let knownDetailCodes: Set<String> = ["STANDARD_ORDER_PLACED", "TEST_ORDER_PLACED", "ORDER_INPROGRESS"]

    /// Decides on the result of attempt number `attempt` (1 for the first).
    static func decide<R: RandomNumberGenerator>(
        _ result: Result<HTTPResponse, AgentError>, attempt: Int, tokenAlreadyRefreshed: Bool,
        backoff: Backoff = .orders, using random: inout R
    ) -> Decision {
        let response: HTTPResponse
        switch result {
        case .failure(let error):
            return .retry(after: backoff.delay(attempt: attempt, using: &random), reason: error.message)
        case .success(let answer):
            response = answer
        }
        switch response.status {
        case 200..<300:
            guard let answer = try? JSONDecoder().decode(ReplenishAnswer.self, from: Data(response.body)),
                !answer.detailCode.isEmpty, answer.detailCode.utf8.count <= 64,
                (answer.eventInstanceId?.utf8.count ?? 0) <= 255
            else {
                return .retry(
                    after: backoff.delay(attempt: attempt, using: &random),
                    reason: "DRS answered \(response.status) with a body the agent cannot read")
            }
            // An unknown detail code says neither "placed" nor "not placed": retrying could order twice and
            // completing could lose the press, so the entry is parked with the code for the customer to see.
            guard knownDetailCodes.contains(answer.detailCode) else {
                return .park(reason: .unknownDetailCode(LWAClient.sanitize(answer.detailCode)))
            }
            return .done(detailCode: answer.detailCode, eventInstanceId: answer.eventInstanceId)
        case _ where DRSClient.isTokenRejection(response):
            if !tokenAlreadyRefreshed { return .refreshTokenAndRetry }
            return .retry(
                after: backoff.delay(attempt: attempt, using: &random),
                reason: "DRS rejected a freshly refreshed token")
        case 408, 429, 500...599:
            // 408: the server gave up waiting for the request; like a timeout, nothing was placed by it.
            var delay = backoff.delay(attempt: attempt, using: &random)
            if let retryAfter = response.retryAfter { delay = max(delay, retryAfter) }
            return .retry(after: delay, reason: "DRS answered \(response.status)")
        case 404:
            return .park(reason: .unknownSlot)
        default:
            let message = (try? JSONDecoder().decode(DRSMessage.self, from: Data(response.body)))?.message
            if message?.lowercased().containsText("not subscribed") == true { return .park(reason: .notSubscribed) }
            return .park(reason: .refused(status: response.status))
        }
    }
}

extension String {
    var trimmingSpaces: String { Substring(self).trimmingCharacters(in: " \t") }
}

/// The body of a successful replenish.
private struct ReplenishAnswer: Decodable {
    var detailCode: String
    var eventInstanceId: String?
}

/// DRS's error body: `{"message":"…"}`.
struct DRSMessage: Decodable {
    var message: String?
}
