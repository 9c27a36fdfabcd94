import Foundation

/// Code-based linking (docs/protocol.md): `POST /auth/O2/create/codepair`, the token endpoint's
/// `device_code` grant, and `POST /admin/enter-code`, which plays the customer typing the code.
extension EmulatorState {
    /// `POST /auth/O2/create/codepair`: checks the request as `/ap/oa` checks its query, and answers a new pair.
    mutating func createCodePair(_ request: EmulatorRequest, now: Date) -> EmulatorResponse {
        stats.codePairRequests += 1
        let params: [String: String]
        switch Self.tokenParameters(request) {
        case .success(let p): params = p
        case .failure(let failure): return failure
        }
        func bad(_ description: String, code: String = "invalid_request") -> EmulatorResponse {
            .oauthError(400, code, description)
        }
        guard params["response_type"] == "device_code" else { return bad("response_type must be device_code") }
        guard let clientId = params["client_id"], !clientId.isEmpty else { return bad("Missing client_id") }
        guard let scope = params["scope"], scope.split(separator: " ").contains("dash:replenish") else {
            return bad("scope must include dash:replenish", code: "invalid_scope")
        }
        guard let scopeData = params["scope_data"] else { return bad("Missing scope_data") }
        let device: DeviceIdentity
        switch Self.device(scopeData: scopeData, clientId: clientId) {
        case .success(let found): device = found
        case .failure(let problem): return bad(problem.message)
        }
        var userCode = RandomText.userCode()
        while codePairs.values.contains(where: { $0.userCode == userCode }) { userCode = RandomText.userCode() }
        let deviceCode = "DC" + RandomText.tokenBody(62)
        codePairs[deviceCode] = CodePairRecord(
            userCode: userCode, device: device, expiresAt: now.addingTimeInterval(config.codePairLifetime),
            interval: config.codePairInterval, lastPollAt: now)
        stats.codePairsIssued += 1
        return .json(
            200,
            .obj([
                "user_code": .string(userCode), "device_code": .string(deviceCode),
                "verification_uri": .string(config.verificationURI),
                "expires_in": .number(config.codePairLifetime.rounded()),
                "interval": .number(config.codePairInterval.rounded()),
            ]),
            headers: [("Cache-Control", "no-store")])
    }

    /// The token endpoint's `device_code` grant. Checks, in this order: parameters (`invalid_request`), a known
    /// pair whose user code matches and that was neither used nor revoked (`invalid_grant`), its expiry
    /// (`invalid_code_pair`), the interval since the pair was made or last polled (`slow_down`, and the
    /// interval grows by 5 s), the customer (`authorization_pending`); then the tokens.
    mutating func pollCodePair(_ params: [String: String], now: Date) -> EmulatorResponse {
        let response = answerCodePairPoll(params, now: now)
        let outcome =
            response.status == 200
            ? "granted" : response.reason.flatMap { $0.split(separator: ":").first.map(String.init) } ?? "unknown"
        stats.codePairPolls[outcome, default: 0] += 1
        return response
    }

    private mutating func answerCodePairPoll(_ params: [String: String], now: Date) -> EmulatorResponse {
        let missing = ["device_code", "user_code"].filter { (params[$0] ?? "").isEmpty }
        guard missing.isEmpty else {
            return .oauthError(400, "invalid_request", "Missing parameter: \(missing.joined(separator: ", "))")
        }
        let deviceCode = params["device_code"]!
        guard let pair = codePairs[deviceCode], pair.userCode == params["user_code"] else {
            return .oauthError(400, "invalid_grant", "Unknown device_code, or user_code does not match it")
        }
        guard !pair.used, !pair.revoked else {
            return .oauthError(400, "invalid_grant", "The code pair has already been used")
        }
        guard now < pair.expiresAt else {
            return .oauthError(400, "invalid_code_pair", "The code pair has expired")
        }
        codePairs[deviceCode]?.lastPollAt = now
        guard now.timeIntervalSince(pair.lastPollAt) >= pair.interval else {
            codePairs[deviceCode]?.interval += 5
            return .oauthError(400, "slow_down", "Polled sooner than the interval")
        }
        guard pair.entered else {
            return .oauthError(400, "authorization_pending", "The customer has not entered the code yet")
        }
        codePairs[deviceCode]?.used = true
        return newPairing(pair.device, grantType: "device_code", now: now)
    }

    /// `POST /admin/enter-code` `{"userCode":"…"}`: the customer enters the code at the verification page.
    mutating func adminEnterCode(_ request: EmulatorRequest, now: Date) -> EmulatorResponse {
        guard let body = try? JSONValue.parse(request.body), case .object = body,
            let userCode = body["userCode"]?.stringValue
        else { return .message(400, "Body must be a JSON object with userCode, a string") }
        // People type codes: case does not matter.
        guard let (deviceCode, pair) = codePairs.first(where: { $0.value.userCode == userCode.uppercased() }) else {
            return .message(404, "No code pair has user code \(userCode)")
        }
        guard !pair.used, !pair.revoked else { return .message(400, "The code pair has already been used") }
        guard now < pair.expiresAt else { return .message(400, "The code pair has expired") }
        codePairs[deviceCode]?.entered = true
        stats.codesEntered += 1
        return .json(
            200,
            .obj([
                "userCode": .string(pair.userCode), "entered": true,
                "device": .obj(["serial": .string(pair.device.serial), "model": .string(pair.device.model)]),
            ]))
    }
}
