import Foundation
import Testing

@testable import ReplenishAgent

/// The setup key's proofs against the real agent and emulator (issue 41, points 1, 2 and 5): the device's
/// `deviceInfo` proof of a nonce and its session, the companion's `companionInfo` proof checked before
/// anything reaches LWA, the production phase's need for a key. Proofs are computed here with the agent's
/// `SetupKey` (its algorithm is held to docs/companion-app.md's test vector by `SetupKeyTests`) and by the
/// emulator's companion with the `openssl` tool.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct PairingProofTests {
    /// An emulator and an unpaired agent with a setup key, whose pairing port answers.
    func startAgentWithAKey() throws -> (harness: Harness, emulator: String, port: Int, config: String, key: SetupKey) {
        let harness = Harness()
        let (emulator, port, config, _) = try harness.startUnpairedAgent()
        return (harness, emulator, port, config, try #require(harness.setupKey))
    }

    static let clientId = "amzn1.application-oa2-client.emulator"
    static let redirectURI = "https://companion.example/redirect"

    /// `GET /provision/deviceInfo` with `query`, waiting out the per-address rate limit (429) for at most 30 s.
    func deviceInfo(_ harness: Harness, port: Int, query: String) throws -> (status: Int, body: [String: Any]) {
        var answer = HTTPResponse(status: 0, headers: [], body: [])
        try harness.waitUntil("deviceInfo without 429", timeout: 30) {
            answer = try CurlEasy(options: .init()).perform(
                HTTPRequest(method: .get, url: "http://127.0.0.1:\(port)/provision/deviceInfo\(query)"))
            return answer.status != 429
        }
        let body = (try? JSONSerialization.jsonObject(with: Data(answer.body))) as? [String: Any] ?? [:]
        return (answer.status, body)
    }

    /// `POST /provision/companionInfo` with the four fields and `proof` (none when nil).
    func companionInfo(_ port: Int, sessionId: String, code: String, proof: String?) throws -> (Int, String) {
        var fields = [
            "sessionId": sessionId, "authCode": code, "clientId": Self.clientId, "redirectUri": Self.redirectURI,
        ]
        if let proof { fields["proof"] = proof }
        let answer = try CurlEasy(options: .init()).perform(
            HTTPRequest(
                method: .post, url: "http://127.0.0.1:\(port)/provision/companionInfo",
                headers: [("Content-Type", "application/json")],
                body: Array(try JSONSerialization.data(withJSONObject: fields))))
        let body = (try? JSONSerialization.jsonObject(with: Data(answer.body))) as? [String: Any]
        return (answer.status, body?["error"] as? String ?? "")
    }

    /// The customer's consent at the emulated LWA for a device session's challenge: the authorization code.
    func authorize(_ harness: Harness, emulator: String, info: [String: Any]) throws -> String {
        let scopeData: [String: Any] = [
            "dash:replenish": [
                "device_model": info["deviceModel"] as? String ?? "", "serial": info["serial"] as? String ?? "",
                "is_test_device": info["isTestDevice"] as? Bool ?? false,
                "should_include_non_live": info["shouldIncludeNonLive"] as? Bool ?? false,
            ]
        ]
        var components = URLComponents(string: emulator + "/ap/oa")!
        components.queryItems = [
            URLQueryItem(name: "client_id", value: Self.clientId),
            URLQueryItem(name: "scope", value: "dash:replenish"),
            URLQueryItem(
                name: "scope_data",
                value: String(decoding: try JSONSerialization.data(withJSONObject: scopeData), as: UTF8.self)),
            URLQueryItem(name: "response_type", value: "code"),
            URLQueryItem(name: "redirect_uri", value: Self.redirectURI),
            URLQueryItem(name: "code_challenge", value: info["codeChallenge"] as? String ?? ""),
            URLQueryItem(name: "code_challenge_method", value: "S256"),
        ]
        // A query value's `+` and `:` must reach the emulator as themselves, its JSON's quotes escaped.
        let url = components.url!.absoluteString.replacingOccurrences(of: "+", with: "%2B")
        let answer = try CurlEasy(options: .init()).perform(HTTPRequest(method: .get, url: url))
        let location = answer.header("location") ?? ""
        let code = URLComponents(string: location)?.queryItems?.first { $0.name == "code" }?.value
        return try #require(code, "LWA's consent answered \(answer.status)")
    }

    func proof(_ key: SetupKey, sessionId: String, code: String) -> String {
        key.proof(
            of: SetupKey.companionInfoMessage(
                sessionId: sessionId, authCode: code, clientId: Self.clientId, redirectUri: Self.redirectURI))
    }

    static let nonce = "00112233445566778899aabbccddeeff"

    @Test func deviceInfoNeedsANonceAndAnswersAProofOfItAndOfTheSession() throws {
        let (harness, _, port, _, key) = try startAgentWithAKey()
        // Missing or malformed nonce: 400 INVALID_PARAM (no session started).
        for query in [
            "", "?nonce=", "?nonce=0011", "?nonce=\(Self.nonce)0", "?nonce=0011223344556677889zaabbccddeeff",
            "?other=\(Self.nonce)",
        ] {
            let answer = try deviceInfo(harness, port: port, query: query)
            #expect(answer.status == 400, "\(query)")
            #expect(answer.body["error"] as? String == "INVALID_PARAM", "\(query)")
            #expect(answer.body["sessionId"] == nil)
        }
        // The right nonce: the proof of the nonce, this session and the device's fields.
        func expectedProof(_ body: [String: Any], nonce: String) -> String {
            key.proof(
                of: SetupKey.deviceInfoMessage(
                    nonce: nonce, sessionId: body["sessionId"] as? String ?? "",
                    codeChallenge: body["codeChallenge"] as? String ?? "",
                    codeChallengeMethod: body["codeChallengeMethod"] as? String ?? "",
                    serial: body["serial"] as? String ?? "", deviceModel: body["deviceModel"] as? String ?? "",
                    isTestDevice: body["isTestDevice"] as? Bool ?? false,
                    shouldIncludeNonLive: body["shouldIncludeNonLive"] as? Bool ?? false))
        }
        let first = try deviceInfo(harness, port: port, query: "?nonce=\(Self.nonce)")
        #expect(first.status == 200)
        let firstProof = first.body["proof"] as? String
        #expect(firstProof != nil && firstProof == expectedProof(first.body, nonce: Self.nonce))
        // The same nonce again (a replayed request): a new session, whose proof is not the old one's, and the old
        // proof does not prove the new session.
        let second = try deviceInfo(harness, port: port, query: "?nonce=\(Self.nonce)")
        #expect(second.status == 200)
        #expect(second.body["sessionId"] as? String != first.body["sessionId"] as? String)
        let secondProof = second.body["proof"] as? String ?? ""
        #expect(secondProof == expectedProof(second.body, nonce: Self.nonce))
        #expect(secondProof != firstProof)
        #expect(
            !key.accepts(
                firstProof ?? "",
                of: SetupKey.deviceInfoMessage(
                    nonce: Self.nonce, sessionId: second.body["sessionId"] as? String ?? "",
                    codeChallenge: second.body["codeChallenge"] as? String ?? "", codeChallengeMethod: "S256",
                    serial: "TEST0001", deviceModel: "model-1", isTestDevice: true, shouldIncludeNonLive: true)))
        // Another nonce, another proof.
        let third = try deviceInfo(harness, port: port, query: "?nonce=ffeeddccbbaa99887766554433221100")
        #expect(third.body["proof"] as? String == expectedProof(third.body, nonce: "ffeeddccbbaa99887766554433221100"))
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func aWrongOrMissingCompanionProofIsRefusedBeforeLWAAndTheSessionStaysValid() throws {
        let (harness, emulator, port, config, key) = try startAgentWithAKey()
        let a = try deviceInfo(harness, port: port, query: "?nonce=\(Self.nonce)").body
        let sessionA = try #require(a["sessionId"] as? String)
        let codeA = try authorize(harness, emulator: emulator, info: a)
        // Missing, wrong, not hex, and the right proof of another session id: 403 INCORRECT_PROOF.
        let wrongProofs: [String?] = [
            nil, String(repeating: "0", count: 64), "not a proof", proof(key, sessionId: "another", code: codeA),
            proof(key, sessionId: sessionA, code: codeA).uppercased(),
        ]
        for wrong in wrongProofs {
            let (status, error) = try companionInfo(port, sessionId: sessionA, code: codeA, proof: wrong)
            #expect(status == 403 && error == "INCORRECT_PROOF", "\(status) \(error)")
        }
        // The code never went to LWA.
        #expect(try harness.stats(emulator)["tokenRequests"] as? Int == 0)
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == false)

        // A new session (the same address: it replaces A). A's right proof is not B's.
        let b = try deviceInfo(harness, port: port, query: "?nonce=\(Self.nonce)").body
        let sessionB = try #require(b["sessionId"] as? String)
        let (statusB, errorB) = try companionInfo(
            port, sessionId: sessionB, code: codeA, proof: proof(key, sessionId: sessionA, code: codeA))
        #expect(statusB == 403 && errorB == "INCORRECT_PROOF", "\(statusB) \(errorB)")
        #expect(try harness.stats(emulator)["tokenRequests"] as? Int == 0)

        // Session B is still valid: with its own code and the right proof, the device pairs.
        let codeB = try authorize(harness, emulator: emulator, info: b)
        let (status, error) = try companionInfo(
            port, sessionId: sessionB, code: codeB, proof: proof(key, sessionId: sessionB, code: codeB))
        #expect(status == 204, "\(status) \(error)")
        #expect(try harness.stats(emulator)["tokenRequests"] as? Int == 1)
        try harness.waitUntil("paired") { try harness.statusJSON(config: config)["paired"] as? Bool == true }
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func theCompanionPairsWithTheLabelAndRefusesADeviceThatCannotProveTheKey() throws {
        let (harness, emulator, port, config, key) = try startAgentWithAKey()
        // A companion holding another unit's label: the device's proof does not check out, nothing is sent.
        var generator = SystemRandomNumberGenerator()
        let otherLabel = LabelPayload(serial: "TEST0001", key: SetupKey(using: &generator)).text
        let refused = try harness.run(
            "replenish-emulator",
            ["companion", "--device", "http://127.0.0.1:\(port)", "--lwa", emulator, "--setup", otherLabel])
        #expect(refused.status == 1)
        #expect(refused.error.contains("did not prove it holds the label's setup key"), "\(refused.error)")
        #expect(try harness.stats(emulator)["tokenRequests"] as? Int == 0)
        // The label's payload, as `label` prints it: both proofs check out and the device pairs.
        let label = try harness.run("replenish-agent", ["label", "--config", config])
        #expect(label.status == 0)
        // (Only booleans reach the expectations, so a failure never prints the key.)
        let labelIsThePayload = label.output == LabelPayload(serial: "TEST0001", key: key).text + "\n"
        #expect(labelIsThePayload)
        let manual = try harness.run("replenish-agent", ["label", "--manual", "--config", config])
        let manualForm =
            manual.output
            == "serial: TEST0001\nsetup key: \(LabelPayload(serial: "TEST0001", key: key).manualEntryKey)\n"
        #expect(manualForm)
        try harness.pair(emulator: emulator, pairingPort: port)
        try harness.waitUntil("paired") { try harness.statusJSON(config: config)["paired"] as? Bool == true }
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func productionNeedsASetupKeyAndTestOnlyWarns() throws {
        let harness = Harness()
        let emulator = "http://127.0.0.1:1"
        let production = try harness.writeConfig(emulator: emulator, pairingPort: 1, phase: "production")
        // The harness gives production a key; take it out.
        let text = try String(contentsOfFile: production, encoding: .utf8)
        let withoutKey = text.replacingOccurrences(
            of: #","setupKeyFile":"\#(harness.directory)/setup-key""#, with: "")
        #expect(withoutKey != text)
        try withoutKey.write(toFile: production, atomically: true, encoding: .utf8)
        let check = try harness.run("replenish-agent", ["check-config", "--config", production])
        #expect(check.status == 1)
        #expect(check.error.contains("pairing.setupKeyFile: is required in the production phase"), "\(check.error)")
        let run = try harness.run("replenish-agent", ["run", "--config", production], timeout: 30)
        #expect(run.status == RunCommand.configurationExitCode)
        #expect(run.error.contains("pairing.setupKeyFile"), "\(run.error)")

        let test = try harness.writeConfig(emulator: emulator, pairingPort: 1)
        let warned = try harness.run("replenish-agent", ["check-config", "--config", test])
        #expect(warned.status == 0, "\(warned.error)")
        #expect(warned.output.contains("warning: pairing.setupKeyFile: not set"), "\(warned.output)")

        // make-setup-key: a key file the config accepts, never replaced.
        let path = harness.directory + "/made-key"
        let made = try harness.run("replenish-agent", ["make-setup-key", path])
        #expect(made.status == 0, "\(made.error)")
        let info = try #require(try POSIX.status(path))
        #expect(info.octalPermissions == "600")
        let madeKey = try #require(SetupKey(fileContents: Array(try Data(contentsOf: URL(fileURLWithPath: path)))))
        let printedTheKey = made.output.contains(madeKey.hex)
        #expect(!printedTheKey)
        let again = try harness.run("replenish-agent", ["make-setup-key", path])
        #expect(again.status == 1 && again.error.contains("exists"))
        let keptTheKey = SetupKey(fileContents: Array(try Data(contentsOf: URL(fileURLWithPath: path)))) == madeKey
        #expect(keptTheKey)
    }
}
