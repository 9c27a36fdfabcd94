import Foundation
import Testing

@testable import ReplenishAgent

/// `replenish-companion` end to end against the emulator (issue 41, point 4): the device's proof checked, LWA's
/// authorize URL with the device's challenge and phase, the emulator's consent page answered as a customer would,
/// LWA's redirect to the companion's local redirect URI, `companionInfo` with the companion's proof.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct CompanionToolTests {
    @Test func theBenchCompanionPairsThroughLWAsConsentAndItsRedirectURI() throws {
        let harness = Harness()
        let (emulator, port, config, _) = try harness.startUnpairedAgent(emulatorArguments: ["--consent-page"])
        let redirectPort = try FreePorts.take()
        let companion = try harness.start(
            "replenish-companion",
            [
                "--setup", try #require(harness.setupPayload), "--client-id", "amzn1.application-oa2-client.emulator",
                "--device", "http://127.0.0.1:\(port)", "--authorize-url", emulator + "/ap/oa",
                "--redirect-port", "\(redirectPort)", "--timeout", "60",
            ], log: "companion.log")
        var authorize = ""
        try harness.waitUntil("the authorize URL") {
            let log = harness.read("companion.log")
            guard let range = log.range(of: "consent at: ") else { return false }
            authorize = String(log[range.upperBound...].prefix { $0 != "\n" })
            return !authorize.isEmpty
        }
        let query = URLComponents(string: authorize)?.queryItems ?? []
        func parameter(_ name: String) -> String? { query.first { $0.name == name }?.value }
        #expect(parameter("scope") == "dash:replenish")
        #expect(parameter("redirect_uri") == "http://localhost:\(redirectPort)/callback")
        #expect(parameter("code_challenge_method") == "S256" && parameter("code_challenge")?.count == 43)
        let scopeData = try JSONSerialization.jsonObject(with: Data((parameter("scope_data") ?? "").utf8))
        let device = (scopeData as? [String: Any])?["dash:replenish"] as? [String: Any]
        #expect(device?["serial"] as? String == "TEST0001" && device?["device_model"] as? String == "model-1")
        #expect(device?["is_test_device"] as? Bool == true && device?["should_include_non_live"] as? Bool == true)

        // The customer: the consent page, then "Allow"; the browser follows LWA's redirect to the companion.
        let page = try CurlEasy(options: .init()).perform(HTTPRequest(method: .get, url: authorize))
        #expect(page.status == 200)
        let html = String(decoding: page.body, as: UTF8.self)
        let marker = #"name="consent" value=""#
        let id = try #require(html.range(of: marker).map { String(html[$0.upperBound...].prefix { $0 != "\"" }) })
        #expect(try harness.stats(emulator)["tokenRequests"] as? Int == 0)
        let allowed = try CurlEasy(options: .init()).perform(
            HTTPRequest(
                method: .post, url: emulator + "/ap/oa/consent",
                headers: [("Content-Type", "application/x-www-form-urlencoded")],
                body: Array("consent=\(id)&decision=allow".utf8)))
        #expect(allowed.status == 302)
        let location = try #require(allowed.header("location"))
        // (A boolean: a failure must not print the authorization code.)
        let toTheRedirectURI = location.hasPrefix("http://localhost:\(redirectPort)/callback?code=")
        #expect(toTheRedirectURI)
        let callback = try CurlEasy(options: .init()).perform(HTTPRequest(method: .get, url: location))
        #expect(callback.status == 200)

        try harness.waitUntil("the companion to finish", timeout: 60) { !companion.isRunning }
        #expect(companion.terminationStatus == 0, "\(harness.read("companion.log"))")
        #expect(harness.read("companion.log").contains("replenish-companion: device TEST0001 paired"))
        try harness.waitUntil("paired") { try harness.statusJSON(config: config)["paired"] as? Bool == true }
        harness.expectNoSecretsInAgentOutput()
    }
}
