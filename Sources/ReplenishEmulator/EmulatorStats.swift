import Foundation

/// What the emulator counted, served as JSON by `GET /admin/stats` for tests.
struct EmulatorStats: Sendable {
    /// One refused request.
    struct Rejection: Sendable {
        var method: String
        var path: String
        var status: Int
        var reason: String
    }

    /// One access token handed out by a grant.
    struct TokenIssue: Sendable {
        var grantType: String
        var at: Date
        var expiresAt: Date
    }

    /// The newest rejections kept; older ones are dropped.
    static let rejectionLimit = 200
    /// The newest token issues kept.
    static let tokenIssueLimit = 1000

    var ordersPlaced: [String: Int] = [:]
    var replenishCalls: [String: Int] = [:]
    var orderInProgressAnswers: [String: Int] = [:]
    var tokenGrants: [String: Int] = [:]
    var tokenErrors: [String: Int] = [:]
    var deviceStatusCalls = 0
    var slotStatusCalls = 0
    var subscriptionInfoCalls = 0
    var deregisterCalls = 0
    /// `DELETE /registration` calls that deregistered a device (answered 200).
    var deregistrations = 0
    var cancelTestOrdersCalls = 0
    var orderInfoCalls = 0
    var invalidTokenAnswers = 0
    /// Faults injected, by kind (queued and random alike).
    var faultsInjected: [Fault.Kind: Int] = [:]
    /// Every request to the token endpoint, whatever the answer (faults and `413` included).
    var tokenRequests = 0
    /// Requests that reached `POST /auth/O2/create/codepair` (any answer), and the pairs handed out.
    var codePairRequests = 0
    var codePairsIssued = 0
    /// `device_code` polls by answer: `authorization_pending`, `slow_down`, `invalid_code_pair`, `granted`, …
    var codePairPolls: [String: Int] = [:]
    /// Codes entered with `POST /admin/enter-code`.
    var codesEntered = 0
    /// TCP connections accepted (HTTP and HTTPS alike).
    var connectionsAccepted = 0
    /// Requests read in full so far on each connection, by connection number (admin requests included).
    var requestsByConnection: [Int: Int] = [:]
    /// Every request read in full (admin requests included).
    var requests = 0
    /// Access tokens issued, oldest first (the newest `tokenIssueLimit`).
    var tokenIssues: [TokenIssue] = []
    var rejected: [Rejection] = []
    /// One request as it arrived: method, path and the emulator's time (before any fault is applied).
    struct Arrival: Sendable {
        var method: String
        var path: String
        var at: Date
        /// The request's `User-Agent` ("" without one): a service operator tells device builds apart by it.
        var userAgent = ""
    }
    /// The newest arrivals kept (admin requests are not recorded).
    static let arrivalLimit = 2000
    /// Every non-admin request as it arrived, oldest first (the newest `arrivalLimit`), so tests can check the
    /// spacing of a device's retries.
    var arrivals: [Arrival] = []
    var lastReplenishHeaders: [String: String] = [:]
    var lastDeviceStatus: JSONValue = .null
    var lastSlotStatus: [String: JSONValue] = [:]

    mutating func noteTokenIssue(_ issue: TokenIssue) {
        tokenIssues.append(issue)
        if tokenIssues.count > Self.tokenIssueLimit {
            tokenIssues.removeFirst(tokenIssues.count - Self.tokenIssueLimit)
        }
    }

    /// How many connections carried 0, 1, 2… requests so far, keyed by that count.
    var requestsPerConnection: [String: Int] {
        var histogram: [String: Int] = [:]
        for count in requestsByConnection.values { histogram[String(count), default: 0] += 1 }
        let silent = connectionsAccepted - requestsByConnection.count
        if silent > 0 { histogram["0"] = silent }
        return histogram
    }

    mutating func reject(_ rejection: Rejection) {
        rejected.append(rejection)
        if rejected.count > Self.rejectionLimit { rejected.removeFirst(rejected.count - Self.rejectionLimit) }
    }

    var json: JSONValue {
        func counts(_ dictionary: [String: Int]) -> JSONValue {
            .sortedObject(dictionary.mapValues { .number(Double($0)) })
        }
        return .obj([
            "ordersPlaced": counts(ordersPlaced),
            "replenishCalls": counts(replenishCalls),
            "orderInProgressAnswers": counts(orderInProgressAnswers),
            "tokenGrants": counts(tokenGrants),
            "tokenErrors": counts(tokenErrors),
            "deviceStatusCalls": .number(Double(deviceStatusCalls)),
            "slotStatusCalls": .number(Double(slotStatusCalls)),
            "subscriptionInfoCalls": .number(Double(subscriptionInfoCalls)),
            "deregisterCalls": .number(Double(deregisterCalls)),
            "deregistrations": .number(Double(deregistrations)),
            "arrivals": .array(
                arrivals.map {
                    .obj([
                        "method": .string($0.method), "path": .string($0.path),
                        "at": .number($0.at.timeIntervalSince1970), "userAgent": .string($0.userAgent),
                    ])
                }),
            "cancelTestOrdersCalls": .number(Double(cancelTestOrdersCalls)),
            "orderInfoCalls": .number(Double(orderInfoCalls)),
            "invalidTokenAnswers": .number(Double(invalidTokenAnswers)),
            "faultsInjected": .object(
                Fault.Kind.allCases.map { .init(key: $0.rawValue, value: .number(Double(faultsInjected[$0] ?? 0))) }),
            "tokenRequests": .number(Double(tokenRequests)),
            "codePairRequests": .number(Double(codePairRequests)),
            "codePairsIssued": .number(Double(codePairsIssued)),
            "codePairPolls": counts(codePairPolls),
            "codesEntered": .number(Double(codesEntered)),
            "connectionsAccepted": .number(Double(connectionsAccepted)),
            "requests": .number(Double(requests)),
            "requestsPerConnection": counts(requestsPerConnection),
            "tokenIssues": .array(
                tokenIssues.map {
                    .obj([
                        "grantType": .string($0.grantType), "at": .number($0.at.timeIntervalSince1970),
                        "expiresAt": .number($0.expiresAt.timeIntervalSince1970),
                    ])
                }),
            "rejected": .array(
                rejected.map {
                    .obj([
                        "method": .string($0.method), "path": .string($0.path),
                        "status": .number(Double($0.status)), "reason": .string($0.reason),
                    ])
                }),
            "lastReplenishHeaders": .sortedObject(lastReplenishHeaders.mapValues { .string($0) }),
            "lastDeviceStatus": lastDeviceStatus,
            "lastSlotStatus": .sortedObject(lastSlotStatus),
        ])
    }
}
