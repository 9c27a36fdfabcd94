import Foundation

/// Login with Amazon: the consent page (`GET /ap/oa`) and the token endpoint (`POST /auth/o2/token`).
extension EmulatorState {
    /// Plays the customer's consent: checks the authorization request and redirects with a fresh code.
    mutating func authorize(_ request: EmulatorRequest, now: Date) -> EmulatorResponse {
        func bad(_ description: String) -> EmulatorResponse {
            .json(
                400, .obj(["error": "invalid_request", "error_description": .string(description)]),
                reason: "invalid_request: \(description)")
        }
        guard let items = request.queryItems else { return bad("Malformed query string") }
        var query: [String: String] = [:]
        for item in items {
            guard query[item.name] == nil else { return bad("Parameter \(item.name) given more than once") }
            query[item.name] = item.value
        }
        guard let clientId = query["client_id"], !clientId.isEmpty else { return bad("Missing client_id") }
        guard query["response_type"] == "code" else { return bad("response_type must be code") }
        guard let scope = query["scope"], scope.split(separator: " ").contains("dash:replenish") else {
            return bad("scope must include dash:replenish")
        }
        guard let scopeDataText = query["scope_data"] else { return bad("Missing scope_data") }
        let device: DeviceIdentity
        switch Self.device(scopeData: scopeDataText, clientId: clientId) {
        case .success(let found): device = found
        case .failure(let reason): return bad(reason.message)
        }
        guard let redirectURI = query["redirect_uri"], !redirectURI.isEmpty else { return bad("Missing redirect_uri") }
        guard let challenge = query["code_challenge"] else { return bad("Missing code_challenge") }
        // RFC 7636 section 4.3: an absent method means plain.
        let method = query["code_challenge_method"] ?? "plain"
        guard method == "S256" || method == "plain" else { return bad("code_challenge_method must be S256 or plain") }
        guard PKCE.isWellFormedChallenge(challenge, method: method) else { return bad("Malformed code_challenge") }

        let pending = PendingConsent(
            device: device, redirectURI: redirectURI, challenge: challenge, challengeMethod: method,
            state: query["state"])
        guard config.consentPage else { return consent(pending, allowed: true, now: now) }
        // The customer's consent as a page: a form a test (or a person) answers.
        let id = RandomText.alphanumeric(24)
        pendingConsents[id] = pending
        let page = """
            <!doctype html><title>Consent</title><p>Allow this app to order for device \(device.serial)?</p>
            <form method="post" action="/ap/oa/consent"><input type="hidden" name="consent" value="\(id)">
            <button name="decision" value="allow">Allow</button><button name="decision" value="deny">Deny</button></form>
            """
        return EmulatorResponse(
            status: 200, headers: [("Content-Type", "text/html; charset=utf-8")], body: Array(page.utf8))
    }

    /// `POST /ap/oa/consent`, the consent page's form (`consent=ID&decision=allow|deny`): the redirect.
    mutating func answerConsent(_ request: EmulatorRequest, now: Date) -> EmulatorResponse {
        let fields = FormEncoding.decode(String(decoding: request.body, as: UTF8.self)) ?? []
        func field(_ name: String) -> String? { fields.first { $0.name == name }?.value }
        guard let id = field("consent"), let pending = pendingConsents.removeValue(forKey: id) else {
            return .message(400, "Unknown or answered consent")
        }
        return consent(pending, allowed: field("decision") == "allow", now: now)
    }

    /// The redirect to the app: a fresh code, or `error=access_denied`.
    private mutating func consent(_ pending: PendingConsent, allowed: Bool, now: Date) -> EmulatorResponse {
        var location = pending.redirectURI + (pending.redirectURI.contains("?") ? "&" : "?")
        if allowed {
            let code = "AN" + RandomText.alphanumeric(18)
            codes[code] = AuthorizationCode(
                device: pending.device, redirectURI: pending.redirectURI, challenge: pending.challenge,
                challengeMethod: pending.challengeMethod, expiresAt: now.addingTimeInterval(config.codeLifetime))
            location += "code=\(FormEncoding.escape(code))&scope=\(FormEncoding.escape("dash:replenish"))"
        } else {
            location += "error=access_denied"
        }
        if let state = pending.state {
            location += "&state=\(FormEncoding.escape(state))"
        }
        return EmulatorResponse(status: 302, headers: [("Location", location)])
    }

    /// Why `scope_data` names no device.
    struct ScopeDataProblem: Error {
        var message: String
    }

    /// The device `scope_data` names (`{"dash:replenish":{"device_model","serial","is_test_device",
    /// "should_include_non_live"}}`), for `/ap/oa` and the code pair alike.
    static func device(scopeData text: String, clientId: String) -> Result<DeviceIdentity, ScopeDataProblem> {
        guard let scopeData = try? JSONValue.parse(text), case .object = scopeData["dash:replenish"] ?? .null,
            let drs = scopeData["dash:replenish"]
        else { return .failure(.init(message: "scope_data must be JSON with a dash:replenish object")) }
        guard let model = drs["device_model"]?.stringValue, isValidIdentifier(model) else {
            return .failure(.init(message: "scope_data device_model missing or malformed"))
        }
        guard let serial = drs["serial"]?.stringValue, isValidSerial(serial) else {
            return .failure(
                .init(message: "scope_data serial missing or malformed (1 to 50 characters of A-Z a-z 0-9)"))
        }
        var flags: [String: Bool] = [:]
        for name in ["is_test_device", "should_include_non_live"] {
            switch drs[name] {
            case nil: flags[name] = false
            case .bool(let value)?: flags[name] = value
            default: return .failure(.init(message: "scope_data \(name) must be a boolean"))
            }
        }
        return .success(
            DeviceIdentity(
                serial: serial, model: model, isTestDevice: flags["is_test_device"]!,
                shouldIncludeNonLive: flags["should_include_non_live"]!, clientId: clientId))
    }

    /// `POST /auth/o2/token`: the authorization-code, refresh-token and device-code grants.
    mutating func tokenGrant(_ request: EmulatorRequest, now: Date) -> EmulatorResponse {
        let params: [String: String]
        switch Self.tokenParameters(request) {
        case .success(let p): params = p
        case .failure(let failure): return recordTokenError(failure)
        }
        if let answer = skillTokenGrant(params, now: now) {
            return answer.status == 200 ? answer : recordTokenError(answer)
        }
        let response: EmulatorResponse
        switch params["grant_type"] {
        case nil, ""?:
            response = .oauthError(400, "invalid_request", "Missing grant_type")
        case "authorization_code"?:
            response = redeemCode(params, now: now)
        case "refresh_token"?:
            response = refresh(params, now: now)
        case "device_code"?:
            response = pollCodePair(params, now: now)
        case let other?:
            response = .oauthError(400, "unsupported_grant_type", "Grant type \(other) is not supported")
        }
        if response.status == 200 {
            stats.tokenGrants[params["grant_type"]!, default: 0] += 1
            return response
        }
        return recordTokenError(response)
    }

    mutating func recordTokenError(_ response: EmulatorResponse) -> EmulatorResponse {
        let code = response.reason.flatMap { $0.split(separator: ":").first.map(String.init) } ?? "unknown"
        stats.tokenErrors[code, default: 0] += 1
        return response
    }

    /// The grant's parameters from a form body (or a JSON object of strings); a repeated one is an error.
    static func tokenParameters(_ request: EmulatorRequest) -> Outcome<[String: String]> {
        let invalid = { (text: String) in EmulatorResponse.oauthError(400, "invalid_request", text) }
        var params: [String: String] = [:]
        if request.mediaType == "application/json" {
            guard case .object(let members)? = try? JSONValue.parse(request.body) else {
                return .failure(invalid("Body is not a JSON object"))
            }
            for member in members {
                guard let value = member.value.stringValue else {
                    return .failure(invalid("Parameter \(member.key) must be a string"))
                }
                guard params[member.key] == nil else {
                    return .failure(invalid("Parameter \(member.key) given more than once"))
                }
                params[member.key] = value
            }
        } else {
            guard let text = String(validating: request.body, as: UTF8.self), let pairs = FormEncoding.decode(text)
            else { return .failure(invalid("Malformed form body")) }
            for pair in pairs {
                guard params[pair.name] == nil else {
                    return .failure(invalid("Parameter \(pair.name) given more than once"))
                }
                params[pair.name] = pair.value
            }
        }
        return .success(params)
    }

    private mutating func redeemCode(_ params: [String: String], now: Date) -> EmulatorResponse {
        let required = ["code", "redirect_uri", "client_id", "code_verifier"]
        let missing = required.filter { (params[$0] ?? "").isEmpty }
        guard missing.isEmpty else {
            return .oauthError(400, "invalid_request", "Missing parameter: \(missing.joined(separator: ", "))")
        }
        let verifier = params["code_verifier"]!
        presentedVerifiers.append(verifier)
        guard PKCE.isWellFormedVerifier(verifier) else {
            return .oauthError(400, "invalid_request", "code_verifier must be 43-128 characters of [A-Za-z0-9-._~]")
        }
        let codeValue = params["code"]!
        guard let code = codes[codeValue] else {
            return .oauthError(400, "invalid_grant", "The authorization code is invalid")
        }
        guard !code.used, !code.revoked else {
            return .oauthError(400, "invalid_grant", "The authorization code has already been used")
        }
        guard now < code.expiresAt else {
            return .oauthError(400, "invalid_grant", "The authorization code has expired")
        }
        guard params["redirect_uri"] == code.redirectURI else {
            return .oauthError(400, "invalid_grant", "redirect_uri does not match the authorization request")
        }
        guard params["client_id"] == code.device.clientId else {
            return .oauthError(400, "invalid_grant", "The code was issued to another client")
        }
        switch PKCE.verify(verifier: verifier, challenge: code.challenge, method: code.challengeMethod) {
        case true?:
            break
        case false?:
            return .oauthError(400, "invalid_grant", "code_verifier does not match the code_challenge")
        case nil:
            return .oauthError(500, "server_error", "Could not compute SHA-256 (is openssl installed?)")
        }
        codes[codeValue]?.used = true
        return newPairing(code.device, grantType: "authorization_code", now: now)
    }

    private mutating func refresh(_ params: [String: String], now: Date) -> EmulatorResponse {
        let missing = ["refresh_token", "client_id"].filter { (params[$0] ?? "").isEmpty }
        guard missing.isEmpty else {
            return .oauthError(400, "invalid_request", "Missing parameter: \(missing.joined(separator: ", "))")
        }
        let presented = params["refresh_token"]!
        guard let record = refreshTokens[presented], !record.revoked, let device = devices[record.deviceKey] else {
            return .oauthError(400, "invalid_grant", "The refresh token is invalid or has been revoked")
        }
        guard params["client_id"] == record.clientId else {
            return .oauthError(401, "invalid_client", "Client authentication failed")
        }
        if let expected = config.clientSecret, let sent = params["client_secret"], sent != expected {
            return .oauthError(401, "invalid_client", "Client authentication failed")
        }
        if !record.used {
            refreshTokens[presented]?.used = true
            // Until-used rotation: the first use of a successor ends its predecessor and any unused siblings.
            if let predecessor = record.predecessor {
                refreshTokens[predecessor]?.revoked = true
                for (token, other) in refreshTokens where other.predecessor == predecessor && token != presented {
                    if !other.used { refreshTokens[token]?.revoked = true }
                }
            }
        }
        var answerToken = presented
        if config.rotateRefreshTokens {
            answerToken = "Atzr|" + RandomText.tokenBody(120)
            var successor = RefreshTokenRecord(deviceKey: record.deviceKey, clientId: record.clientId)
            switch config.oldRefreshTokenPolicy {
            case .invalidate: refreshTokens[presented]?.revoked = true
            case .untilUsed: successor.predecessor = presented
            }
            refreshTokens[answerToken] = successor
        }
        return tokenAnswer(device: device, refreshToken: answerToken, grantType: "refresh_token", now: now)
    }

    /// A code redeemed (`authorization_code` or `device_code`): `device` is registered, gets a new refresh token,
    /// and the answer carries it with a new access token.
    mutating func newPairing(_ device: DeviceIdentity, grantType: String, now: Date) -> EmulatorResponse {
        devices[device.key] = device
        let refreshToken = "Atzr|" + RandomText.tokenBody(120)
        refreshTokens[refreshToken] = RefreshTokenRecord(deviceKey: device.key, clientId: device.clientId)
        return tokenAnswer(device: device, refreshToken: refreshToken, grantType: grantType, now: now)
    }

    /// Issues a new access token for `device` and answers with it and `refreshToken`.
    mutating func tokenAnswer(
        device: DeviceIdentity, refreshToken: String, grantType: String, now: Date
    ) -> EmulatorResponse {
        let accessToken = "Atza|" + RandomText.tokenBody(120)
        let expiresAt = now.addingTimeInterval(config.accessTokenLifetime)
        accessTokens[accessToken] = AccessTokenRecord(deviceKey: device.key, expiresAt: expiresAt)
        stats.noteTokenIssue(.init(grantType: grantType, at: now, expiresAt: expiresAt))
        let lifetime = Int(config.accessTokenLifetime.rounded())
        let expiresIn: JSONValue = config.expiresInAsString ? .string(String(lifetime)) : .number(Double(lifetime))
        return .json(
            200,
            .obj([
                "access_token": .string(accessToken), "refresh_token": .string(refreshToken),
                "token_type": "bearer", "expires_in": expiresIn,
            ]),
            headers: [("Cache-Control", "no-store"), ("Pragma", "no-cache")])
    }

    /// Serials and model ids: 1 to 64 characters of `A-Z a-z 0-9 - + _` (the web guide's wider rule).
    /// Serials: `[A-Za-z0-9]{1,50}` (the DRS integration guide).
    static func isValidSerial(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return (1...50).contains(bytes.count)
            && bytes.allSatisfy { b in (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
            }
    }

    static func isValidIdentifier(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return (1...64).contains(bytes.count)
            && bytes.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D
                    || b == 0x2B || b == 0x5F
            }
    }
}
