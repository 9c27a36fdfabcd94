import Foundation

/// Alexa's side of the maker's smart home skill: LWA's grants for the skill's client (AcceptGrant's code, the
/// refresh), LWA's profile for an account-linking token, and the event gateway (`POST /v3/events`) that checks
/// each event's token and its shape as Amazon's schema and pages give it, and answers as Amazon documents:
/// 202, or 401 INVALID_ACCESS_TOKEN_EXCEPTION, 403 SKILL_DISABLED_EXCEPTION, 400 INVALID_REQUEST_EXCEPTION
/// (429 and 5xx through the fault layer, `/admin/faults` on `/v3/events`).
extension EmulatorState {
    /// `POST /admin/skill/link {"customer"}`: the customer linked their account; the account-linking token.
    mutating func adminSkillLink(_ request: EmulatorRequest) -> EmulatorResponse {
        guard let customer = Self.customerField(request) else { return .message(400, "Give customer") }
        let token = "Atza|link-" + RandomText.tokenBody(40)
        skill.linkTokens[token] = customer
        return .json(200, .obj(["customer": .string(customer), "token": .string(token)]))
    }

    /// `POST /admin/skill/grant {"customer"}`: the code Alexa puts in the customer's AcceptGrant.
    mutating func adminSkillGrant(_ request: EmulatorRequest) -> EmulatorResponse {
        guard let customer = Self.customerField(request) else { return .message(400, "Give customer") }
        let code = "ANgrant" + RandomText.alphanumeric(20)
        skill.grantCodes[code] = customer
        return .json(200, .obj(["customer": .string(customer), "code": .string(code)]))
    }

    /// `POST /admin/skill/disable {"customer"}`: the customer disabled the skill.
    mutating func adminSkillDisable(_ request: EmulatorRequest) -> EmulatorResponse {
        guard let customer = Self.customerField(request) else { return .message(400, "Give customer") }
        skill.disabled.insert(customer)
        return .json(200, .obj(["customer": .string(customer), "disabled": true]))
    }

    /// `POST /admin/skill/expire-tokens`: every event-gateway access token expires now.
    mutating func adminSkillExpireTokens(now: Date) -> EmulatorResponse {
        for token in skill.accessTokens.keys { skill.accessTokens[token]?.expiresAt = now }
        return .json(200, .obj(["expired": .number(Double(skill.accessTokens.count))]))
    }

    /// `GET /admin/gateway`: the events accepted, deliveries per message id, the refusals.
    func adminGateway() -> EmulatorResponse {
        .json(
            200,
            .obj([
                "accepted": .array(skill.accepted),
                "deliveries": .sortedObject(skill.deliveries.mapValues { .number(Double($0)) }),
                "refusals": .array(
                    skill.refusals.map { .obj(["code": .string($0.code), "reason": .string($0.reason)]) }),
            ]))
    }

    static func customerField(_ request: EmulatorRequest) -> String? {
        guard let body = try? JSONValue.parse(request.body), let customer = body["customer"]?.stringValue,
            !customer.isEmpty
        else { return nil }
        return customer
    }

    /// LWA's grants for the skill's client: an AcceptGrant code, or a refresh of the gateway's tokens. Nil when
    /// the grant is not the skill's (a device's code or refresh token), for the device grants to answer.
    mutating func skillTokenGrant(_ params: [String: String], now: Date) -> EmulatorResponse? {
        let customer: String
        switch params["grant_type"] {
        case "authorization_code"?:
            guard let code = params["code"], let owner = skill.grantCodes.removeValue(forKey: code) else { return nil }
            customer = owner
        case "refresh_token"?:
            guard let token = params["refresh_token"], let owner = skill.refreshTokens[token] else { return nil }
            customer = owner
        default:
            return nil
        }
        guard !(params["client_id"] ?? "").isEmpty, !(params["client_secret"] ?? "").isEmpty else {
            return .oauthError(401, "invalid_client", "The skill's client_id and client_secret are required")
        }
        let access = "Atza|gw-" + RandomText.tokenBody(60)
        let refresh = "Atzr|gw-" + RandomText.tokenBody(60)
        skill.accessTokens[access] = .init(
            customer: customer, expiresAt: now.addingTimeInterval(config.accessTokenLifetime))
        skill.refreshTokens[refresh] = customer
        if params["grant_type"] == "refresh_token", let old = params["refresh_token"] {
            skill.refreshTokens[old] = nil
        }
        stats.tokenGrants["skill_" + params["grant_type"]!, default: 0] += 1
        return .json(
            200,
            .obj([
                "access_token": .string(access), "refresh_token": .string(refresh), "token_type": "bearer",
                "expires_in": .number(config.accessTokenLifetime.rounded()),
            ]),
            headers: [("Cache-Control", "no-store")])
    }

    /// `GET /user/profile`: the customer of an account-linking token.
    func userProfile(_ request: EmulatorRequest) -> EmulatorResponse {
        guard let token = Self.bearer(request), let customer = skill.linkTokens[token] else {
            return .oauthError(401, "invalid_token", "The access token is invalid")
        }
        return .json(200, .obj(["user_id": .string(customer), "name": "Emulated Customer"]))
    }

    static func bearer(_ request: EmulatorRequest) -> String? {
        guard let value = request.header("authorization") else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        return parts[1].trimmingCharacters(in: [" ", "\t"])
    }

    /// `POST /v3/events`.
    mutating func gatewayEvent(_ request: EmulatorRequest, now: Date) -> EmulatorResponse {
        func refuse(_ status: Int, _ code: String, _ reason: String) -> EmulatorResponse {
            skill.refusals.append((code, reason))
            return .json(
                status,
                .obj([
                    "header": .obj(["messageId": .string(RandomText.requestId())]),
                    "payload": .obj(["code": .string(code), "description": .string(reason)]),
                ]), reason: "\(code): \(reason)")
        }
        guard let token = Self.bearer(request), let grant = skill.accessTokens[token], now < grant.expiresAt else {
            return refuse(401, "INVALID_ACCESS_TOKEN_EXCEPTION", "the access token is not valid or has expired")
        }
        guard !skill.disabled.contains(grant.customer) else {
            return refuse(403, "SKILL_DISABLED_EXCEPTION", "the customer disabled the skill")
        }
        guard let event = try? JSONValue.parse(request.body) else {
            return refuse(400, "INVALID_REQUEST_EXCEPTION", "the body is not JSON")
        }
        if let problem = GatewaySchema.problem(event, token: token) {
            return refuse(400, "INVALID_REQUEST_EXCEPTION", problem)
        }
        let messageId = event["event"]?["header"]?["messageId"]?.stringValue ?? ""
        skill.deliveries[messageId, default: 0] += 1
        if skill.deliveries[messageId] == 1 { skill.accepted.append(event) }
        return EmulatorResponse(status: 202, headers: [("Content-Type", "application/json")])
    }
}
