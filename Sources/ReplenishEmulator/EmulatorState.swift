import Foundation

/// Everything the emulated LWA and DRS remember, and the one entry point that answers a request.
///
/// A plain value with no I/O, no clock and no locking: the server owns one behind a lock and passes the time
/// in. Fault injection (refused, dropped or delayed answers) is the layer around `handle` in
/// `EmulatorState+Faults.swift`: `dispatch` sees every request and every answer.
struct EmulatorState: Sendable {
    var config: EmulatorConfig
    /// Devices by `DeviceIdentity.key`, updated at every code redemption.
    var devices: [String: DeviceIdentity] = [:]
    var codes: [String: AuthorizationCode] = [:]
    /// Consent pages shown and not answered yet (`consentPage`), by id: the code each would issue, unminted.
    var pendingConsents: [String: PendingConsent] = [:]
    /// Code pairs of code-based linking, by device code.
    var codePairs: [String: CodePairRecord] = [:]
    /// Every `code_verifier` a client presented, for tests that scan a device's output for it.
    var presentedVerifiers: [String] = []
    var accessTokens: [String: AccessTokenRecord] = [:]
    var refreshTokens: [String: RefreshTokenRecord] = [:]
    /// Every order ever placed, by event instance id.
    var orders: [String: PlacedOrder] = [:]
    /// The order in progress for a device and slot (`deviceKey + "\n" + slotId`), by event instance id.
    var ordersInProgress: [String: String] = [:]
    /// Whether each slot is subscribed; the same for every device.
    var subscribed: [String: Bool]
    var stats = EmulatorStats()
    /// Queued and random faults (`/admin/faults`, `/admin/fault-rate`).
    var faults = FaultInjector()
    /// Every replenish request's outcome (`/admin/events`).
    var events = ReplenishEventLog()
    /// The maker's cloud of program alexa: units by id (`EmulatorState+Cloud.swift`).
    var cloudUnits: [String: CloudUnit] = [:]
    /// The maker's smart home skill as Alexa sees it: account links, grants, the event gateway
    /// (`EmulatorState+Gateway.swift`).
    var skill = SkillGateway()

    init(config: EmulatorConfig) {
        self.config = config
        self.subscribed = Dictionary(uniqueKeysWithValues: config.slots.map { ($0, true) })
    }

    /// Answers one request at time `now`, records it in the statistics, and stamps a request id on the answer.
    mutating func handle(_ request: EmulatorRequest, now: Date) -> EmulatorResponse {
        var response = route(request, now: now)
        response.headers.append(("X-Amzn-Requestid", RandomText.requestId()))
        if response.status >= 400, !request.path.hasPrefix("/admin/") {
            stats.reject(
                .init(
                    method: request.method, path: request.path, status: response.status,
                    reason: response.reason ?? "status \(response.status)"))
        }
        return response
    }

    /// The answer to a request whose body was over the server's limit: `413`, recorded like any refusal.
    mutating func refuseTooLarge(_ request: EmulatorRequest, now: Date) -> EmulatorResponse {
        noteArrival(request)
        var response = EmulatorResponse.message(413, "Request body larger than 1 MiB")
        response.headers.append(("X-Amzn-Requestid", RandomText.requestId()))
        stats.reject(.init(method: request.method, path: request.path, status: 413, reason: response.reason!))
        logReplenish(request, response: response, fault: nil, answerDropped: false, now: now)
        return response
    }

    private mutating func route(_ request: EmulatorRequest, now: Date) -> EmulatorResponse {
        guard let segments = request.pathSegments else {
            return .message(400, "Malformed path")
        }
        if request.path.lowercased() == "/auth/o2/token" {
            guard request.method == "POST" else { return .oauthError(405, "invalid_request", "Use POST") }
            return tokenGrant(request, now: now)
        }
        if request.path.lowercased() == "/auth/o2/create/codepair" {
            guard request.method == "POST" else { return .oauthError(405, "invalid_request", "Use POST") }
            return createCodePair(request, now: now)
        }
        // A handler's check that refused the request (`Refusal`) has decided the answer.
        func only(_ method: String, _ answer: () throws(Refusal) -> EmulatorResponse) -> EmulatorResponse {
            guard request.method == method else { return .message(405, "Method \(request.method) not allowed here") }
            do throws(Refusal) { return try answer() } catch { return error.answer }
        }
        // Patterns are path segments; `*` captures one segment.
        func match(_ pattern: String) -> [String]? {
            let parts = pattern.split(separator: "/").map(String.init)
            guard parts.count == segments.count else { return nil }
            var captured: [String] = []
            for (part, segment) in zip(parts, segments) {
                if part == "*" {
                    captured.append(segment)
                } else if part != segment {
                    return nil
                }
            }
            return captured
        }
        if match("v3/events") != nil {
            return only("POST") { gatewayEvent(request, now: now) }
        } else if match("user/profile") != nil {
            return only("GET") { userProfile(request) }
        } else if match("admin/skill/link") != nil {
            return only("POST") { adminSkillLink(request) }
        } else if match("admin/skill/grant") != nil {
            return only("POST") { adminSkillGrant(request) }
        } else if match("admin/skill/disable") != nil {
            return only("POST") { adminSkillDisable(request) }
        } else if match("admin/skill/expire-tokens") != nil {
            return only("POST") { adminSkillExpireTokens(now: now) }
        } else if match("admin/gateway") != nil {
            return only("GET") { adminGateway() }
        } else if let unit = match("v1/units/*/reports")?.first {
            return only("POST") { () throws(Refusal) in try cloudReport(request, unit: unit, now: now) }
        } else if let unit = match("v1/units/*")?.first {
            return only("GET") { () throws(Refusal) in try cloudUnitState(request, unit: unit) }
        } else if match("v1/claims") != nil {
            return only("POST") { () throws(Refusal) in try cloudClaim(request) }
        } else if match("admin/units") != nil {
            return only("POST") { adminRegisterUnit(request) }
        } else if let unit = match("admin/units/*/revoke")?.first {
            return only("POST") { adminRevokeUnit(unit: unit) }
        } else if let unit = match("admin/units/*")?.first {
            return only("GET") { adminUnit(unit: unit) }
        } else if match("ap/oa") != nil {
            return only("GET") { authorize(request, now: now) }
        } else if match("ap/oa/consent") != nil {
            return only("POST") { answerConsent(request, now: now) }
        } else if let slot = match("replenish/*")?.first {
            return only("POST") { () throws(Refusal) in try replenish(request, slot: slot, now: now) }
        } else if let slot = match("slotStatus/*")?.first {
            return only("POST") { () throws(Refusal) in try slotStatus(request, slot: slot, now: now) }
        } else if match("deviceStatus") != nil {
            return only("POST") { () throws(Refusal) in try deviceStatus(request, now: now) }
        } else if match("subscriptionInfo") != nil {
            return only("GET") { () throws(Refusal) in try subscriptionInfo(request, now: now) }
        } else if match("registration") != nil {
            return only("DELETE") { () throws(Refusal) in try deregister(request, now: now) }
        } else if match("testOrders") != nil {
            return only("DELETE") { () throws(Refusal) in try cancelTestOrders(request, slot: nil, now: now) }
        } else if let slot = (match("testOrders/slots/*") ?? match("testOrders/*"))?.first {
            return only("DELETE") { () throws(Refusal) in try cancelTestOrders(request, slot: slot, now: now) }
        } else if let id = match("getOrderInfo/*")?.first {
            return only("GET") { () throws(Refusal) in try orderInfo(request, eventInstanceId: id, now: now) }
        } else if match("admin/stats") != nil {
            return only("GET") { .json(200, stats.json) }
        } else if match("admin/enter-code") != nil {
            return only("POST") { adminEnterCode(request, now: now) }
        } else if match("admin/pairing-secrets") != nil {
            return only("GET") { adminPairingSecrets() }
        } else if let slot = match("admin/deliver/*")?.first {
            return only("POST") { adminDeliver(slot: slot) }
        } else if let slot = match("admin/subscription/*")?.first {
            return only("POST") { adminSubscription(request, slot: slot) }
        } else if match("admin/revoke-refresh-tokens") != nil {
            return only("POST") { adminRevokeRefreshTokens() }
        } else if match("admin/expire-access-tokens") != nil {
            return only("POST") { adminExpireAccessTokens(now: now) }
        } else if match("admin/faults") != nil {
            switch request.method {
            case "GET": return .json(200, faults.json)
            case "POST": return adminAddFault(request)
            case "DELETE": return .json(200, .obj(["cleared": .number(Double(faults.clear()))]))
            default: return .message(405, "Method \(request.method) not allowed here")
            }
        } else if match("admin/fault-rate") != nil {
            return only("POST") { adminFaultRate(request) }
        } else if match("admin/rotation") != nil {
            switch request.method {
            case "GET": return .json(200, rotationJSON)
            case "POST": return adminRotation(request)
            default: return .message(405, "Method \(request.method) not allowed here")
            }
        } else if match("admin/check-refresh-token") != nil {
            return only("POST") { adminCheckRefreshToken(request) }
        } else if match("admin/events") != nil {
            return only("GET") { adminEvents(request) }
        } else {
            return .message(404, "No such resource: \(request.method) \(request.path)")
        }
    }
}
