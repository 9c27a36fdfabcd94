/// What the emulator counted, served as JSON by `GET /admin/stats` for tests.
struct EmulatorStats: Sendable {
    /// One refused request.
    struct Rejection: Sendable {
        var method: String
        var path: String
        var status: Int
        var reason: String
    }

    /// The newest rejections kept; older ones are dropped.
    static let rejectionLimit = 200

    var ordersPlaced: [String: Int] = [:]
    var replenishCalls: [String: Int] = [:]
    var orderInProgressAnswers: [String: Int] = [:]
    var tokenGrants: [String: Int] = [:]
    var tokenErrors: [String: Int] = [:]
    var deviceStatusCalls = 0
    var slotStatusCalls = 0
    var subscriptionInfoCalls = 0
    var deregisterCalls = 0
    var cancelTestOrdersCalls = 0
    var orderInfoCalls = 0
    var invalidTokenAnswers = 0
    /// Faults injected, by kind (queued and random alike).
    var faultsInjected: [Fault.Kind: Int] = [:]
    /// Every request to the token endpoint, whatever the answer (faults and `413` included).
    var tokenRequests = 0
    /// TCP connections accepted (HTTP and HTTPS alike).
    var connectionsAccepted = 0
    var rejected: [Rejection] = []
    var lastReplenishHeaders: [String: String] = [:]
    var lastDeviceStatus: JSONValue = .null
    var lastSlotStatus: [String: JSONValue] = [:]

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
            "cancelTestOrdersCalls": .number(Double(cancelTestOrdersCalls)),
            "orderInfoCalls": .number(Double(orderInfoCalls)),
            "invalidTokenAnswers": .number(Double(invalidTokenAnswers)),
            "faultsInjected": .object(
                Fault.Kind.allCases.map { .init(key: $0.rawValue, value: .number(Double(faultsInjected[$0] ?? 0))) }),
            "tokenRequests": .number(Double(tokenRequests)),
            "connectionsAccepted": .number(Double(connectionsAccepted)),
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
