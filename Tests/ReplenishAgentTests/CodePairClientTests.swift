import Foundation
import Logging
import Synchronization
import Testing

@testable import ReplenishAgent

/// Code-based linking's LWA answers (`CodePairClient`), what `status` shows of a code, and its LED pattern.
@Suite(.tags(.unit)) struct CodePairClientTests {
    // MARK: LWA's answers

    @Test func codePairAnswersAreCheckedBeforeUse() {
        func body(_ text: String) -> CodePairClient.Issued? { CodePairClient.issued(Array(text.utf8)) }
        let good = body(
            #"{"user_code":"ABC123","device_code":"DC1","verification_uri":"https://amazon.com/us/code","expires_in":600,"interval":30}"#
        )
        #expect(good?.userCode == "ABC123" && good?.expiresIn == .seconds(600) && good?.interval == .seconds(30))
        // Numbers as strings, and RFC 8628's 5 s when the interval is absent.
        let strings = body(#"{"user_code":"A","device_code":"D","verification_uri":"u","expires_in":"600"}"#)
        #expect(strings?.expiresIn == .seconds(600) && strings?.interval == .seconds(5))
        for bad in [
            #"{"user_code":"","device_code":"D","verification_uri":"u","expires_in":600}"#,
            #"{"user_code":"A B","device_code":"D","verification_uri":"u","expires_in":600}"#,
            #"{"user_code":"A","device_code":"D\r\nX: y","verification_uri":"u","expires_in":600}"#,
            #"{"user_code":"A","device_code":"D","verification_uri":"u","expires_in":0}"#,
            #"{"user_code":"A","device_code":"D","verification_uri":"u","expires_in":600,"interval":0}"#,
            #"{"user_code":"A","device_code":"D","verification_uri":"u","expires_in":"soon"}"#,
            #"{"user_code":"A","verification_uri":"u","expires_in":600}"#, "<html>",
        ] {
            #expect(body(bad) == nil, "\(bad)")
        }
    }

    func client(_ http: ScriptedHTTPClient) throws -> CodePairClient {
        CodePairClient(
            lwa: LWAClient(
                http: http, tokenURL: try EndpointURL("http://127.0.0.1:1/auth/o2/token"), clientSecret: nil),
            codePairURL: try EndpointURL("http://127.0.0.1:1/auth/O2/create/codepair"))
    }

    @Test func pollAnswersMeanWhatPROTOCOLSays() async throws {
        func answer(_ status: Int, _ text: String, headers: [(String, String)] = []) async throws
            -> CodePairClient.PollAnswer
        {
            try await client(ScriptedHTTPClient { _ in json(status, text, headers: headers) })
                .poll(deviceCode: Secret("DC"), userCode: "U")
        }
        func error(_ code: String, status: Int = 400) async throws -> CodePairClient.PollAnswer {
            try await answer(status, #"{"error":"\#(code)","error_description":"…"}"#)
        }
        #expect(try await error("authorization_pending") == .pending)
        #expect(try await error("slow_down") == .slowDown)
        #expect(try await error("invalid_code_pair") == .invalidCodePair)
        #expect(try await error("expired_token") == .invalidCodePair)
        #expect(
            try await error("invalid_client", status: 401)
                == .failed(.configuration(reason: "LWA refused: invalid_client")))
        #expect(try await error("access_denied") == .failed(.refused(reason: "LWA refused: access_denied")))
        #expect(
            try await answer(503, "", headers: [("retry-after", "7")])
                == .failed(.transient(reason: "LWA answered 503", retryAfter: .seconds(7))))
        #expect(
            try await answer(200, #"{"access_token":"Atza|a","refresh_token":"Atzr|r","expires_in":3600}"#)
                == .granted(CodeLinkingTests.grant))
        guard case .failed(.transient) = try await answer(200, "<html>") else {
            Issue.record("an unreadable 200 is transient")
            return
        }
        let offline = try client(
            ScriptedHTTPClient { (_) throws(AgentError) -> HTTPResponse in
                throw AgentError(.network, "connection refused")
            })
        #expect(
            await offline.poll(deviceCode: Secret("DC"), userCode: "U")
                == .failed(.transient(reason: "connection refused", retryAfter: nil)))
    }

    @Test func requestsCarryExactlyTheFieldsOfPROTOCOL() async throws {
        let http = ScriptedHTTPClient { request in
            if request.url.hasSuffix("codepair") {
                return json(
                    200,
                    #"{"user_code":"U1","device_code":"DC1","verification_uri":"https://amazon.com/us/code","expires_in":600,"interval":30}"#
                )
            }
            return json(400, #"{"error":"authorization_pending"}"#)
        }
        let lwa = try client(http)
        // A released device passes no flags (#29.10): both keys left out, as Amazon's sample devices do.
        let expected: [(AgentConfig.Phase, Bool?, Bool?)] = [
            (.test, true, true), (.certification, false, true), (.production, nil, nil),
        ]
        for (phase, test, nonLive) in expected {
            let result = await lwa.requestCodePair(
                clientId: "amzn1.application-oa2-client.x",
                device: .init(serial: "SN0001", model: "model-1", phase: phase))
            #expect((try? result.get())?.userCode == "U1")
            let form = try #require(Self.form(http.requests.last!))
            #expect(http.requests.last!.url == "http://127.0.0.1:1/auth/O2/create/codepair")
            #expect(Set(form.keys) == ["response_type", "client_id", "scope", "scope_data"])
            #expect(form["response_type"] == "device_code" && form["scope"] == "dash:replenish")
            #expect(form["client_id"] == "amzn1.application-oa2-client.x")
            let scopeData = try #require(
                try JSONSerialization.jsonObject(with: Data(form["scope_data"]!.utf8)) as? [String: [String: Any]])
            let drs = try #require(scopeData["dash:replenish"])
            #expect(drs["serial"] as? String == "SN0001" && drs["device_model"] as? String == "model-1")
            #expect(drs["is_test_device"] as? Bool == test && drs["should_include_non_live"] as? Bool == nonLive)
            #expect(drs.keys.contains("is_test_device") == (test != nil))
            #expect(drs.keys.contains("should_include_non_live") == (nonLive != nil))
        }
        #expect(await lwa.poll(deviceCode: Secret("DC1"), userCode: "U1") == .pending)
        let poll = try #require(Self.form(http.requests.last!))
        #expect(http.requests.last!.url == "http://127.0.0.1:1/auth/o2/token")
        #expect(poll == ["grant_type": "device_code", "device_code": "DC1", "user_code": "U1"])
    }

    /// The form fields of a request body.
    static func form(_ request: HTTPRequest) -> [String: String]? {
        guard let body = request.body, let text = String(bytes: body, encoding: .utf8) else { return nil }
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let value = parts[1].removingPercentEncoding else { return nil }
            fields[parts[0]] = value
        }
        return fields
    }

    // MARK: status

    /// A config of `mode` whose state directory exists (0700), loaded.
    func config(mode: String) throws -> AgentConfig { try ConfigTests.loadedConfig(pairingMode: mode) }

    @Test func statusShowsTheCodeOnlyWhileItCanBeEntered() async throws {
        let code = LinkingCode(
            userCode: "ABC123", verificationURI: "https://amazon.com/us/code", expiresAt: 1_800_000_600)
        let config = try config(mode: "code")
        await ShownStatusBook(runtimeDirectory: config.runtimeDirectory, logger: .init(label: "test"))
            .recordLinkingCode(code)
        func encoded(_ report: StatusReport) throws -> [String: Any] {
            try JSONSerialization.jsonObject(with: JSONEncoder().encode(report)) as? [String: Any] ?? [:]
        }

        let shown = StatusReport(config: config, now: 1_800_000_000)
        #expect(
            shown.linking
                == .init(
                    userCode: "ABC123", verificationURI: "https://amazon.com/us/code", expiresAt: "2027-01-15T08:10:00Z"
                ))
        #expect(shown.pairingMode == "code" && !shown.paired)
        #expect(shown.pairingState.contains("enter code ABC123 at https://amazon.com/us/code"))
        let json = try encoded(shown)
        #expect(
            (json["linking"] as? [String: String])
                == [
                    "userCode": "ABC123", "verificationURI": "https://amazon.com/us/code",
                    "expiresAt": "2027-01-15T08:10:00Z",
                ])
        // Expired: gone (a stopped agent's code is not offered past its time).
        let expired = StatusReport(config: config, now: 1_800_000_600)
        #expect(try expired.linking == nil && encoded(expired)["linking"] == nil)
        #expect(expired.pairingState.contains("no code to enter yet"))
        // Companion mode never shows one.
        let companion = try self.config(mode: "companion")
        await ShownStatusBook(runtimeDirectory: companion.runtimeDirectory, logger: .init(label: "test"))
            .recordLinkingCode(code)
        #expect(StatusReport(config: companion, now: 1_800_000_000).linking == nil)
        // Paired: gone, whatever the file says.
        try await FileTokenStore(stateDirectory: config.stateDirectory).save(
            TokenSet(
                clientId: "c", refreshToken: Secret("Atzr|r"), accessToken: Secret("Atza|a"),
                accessTokenExpiresAt: 1_800_003_600, accessTokenLifetime: 3600))
        let paired = StatusReport(config: config, now: 1_800_000_000)
        #expect(paired.paired && paired.linking == nil)
    }

    // MARK: the LED

    @Test func aWaitingCodeHasItsOwnPatternWhileUnpaired() {
        var facts = LEDPattern.Facts()
        facts.codeWaiting = true
        #expect(LEDPattern.pattern(for: facts) == .codeWaiting)
        facts.pairingWindowOpen = true
        #expect(LEDPattern.pattern(for: facts) == .codeWaiting)
        facts.acknowledging = true
        #expect(LEDPattern.pattern(for: facts) == .acknowledge, "a press's flash still shows")
        facts.acknowledging = false
        facts.codeWaiting = false
        #expect(LEDPattern.pattern(for: facts) == .pairingMode)
        facts.pairingWindowOpen = false
        #expect(LEDPattern.pattern(for: facts) == .needsAttention, "no code yet (LWA unreachable): attention")
        facts.codeWaiting = true
        facts.paired = true
        #expect(LEDPattern.pattern(for: facts) == .off, "a paired device shows no code")
        // It blinks, unlike any other pattern.
        let steps = LEDPattern.codeWaiting.steps?.map { "\($0.on)\($0.milliseconds)" }
        #expect(steps == ["true1500", "false500"])
        let cycles = LEDPattern.allCases.compactMap { $0.steps?.map { "\($0.on)\($0.milliseconds)" } }
        #expect(cycles.filter { $0 == steps }.count == 1)
    }
}
