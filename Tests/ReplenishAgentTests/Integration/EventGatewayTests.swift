import Foundation
import Testing

@testable import ReplenishAgent

/// The emulator's Alexa event gateway and LWA for a skill's client (`EmulatorState+Gateway.swift`): a grant's
/// code becomes the gateway's tokens, an event of the right shape is taken (202), and the gateway refuses what
/// Amazon's schema refuses, a token that is not valid and a customer who disabled the skill, as Amazon answers.
@Suite(.tags(.process), .serialized) struct EventGatewayTests {
    static let changeReport = """
        {"event": {"header": {"namespace": "Alexa", "name": "ChangeReport", "payloadVersion": "3",
          "messageId": "MID"},
         "endpoint": {"scope": {"type": "BearerToken", "token": "TOKEN"}, "endpointId": "TEST0001"},
         "payload": {"change": {"cause": {"type": "PHYSICAL_INTERACTION"}, "properties": [
           {"namespace": "Alexa.InventoryLevelSensor", "instance": "InventoryLevelSensor-tank", "name": "level",
            "value": {"@type": "Percentage", "value": 40}, "timeOfSample": "2026-11-29T09:12:03Z",
            "uncertaintyInMilliseconds": 0}]}}},
         "context": {"properties": []}}
        """

    /// A customer's grant redeemed with the skill's client: the gateway's access token.
    static func gatewayToken(_ harness: Harness, _ emulator: String, customer: String) throws -> String {
        let grant = try harness.emulator(emulator, .post, "/admin/skill/grant", body: #"{"customer":"\#(customer)"}"#)
        let code = try #require(grant["code"] as? String)
        let response = try CurlEasy(options: .init()).perform(
            HTTPRequest(
                method: .post, url: emulator + "/auth/o2/token",
                headers: [("Content-Type", "application/x-www-form-urlencoded")],
                body: Array("grant_type=authorization_code&code=\(code)&client_id=skill&client_secret=s".utf8)))
        #expect(response.status == 200)
        let tokens = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        return try #require(tokens?["access_token"] as? String)
    }

    static func send(_ emulator: String, token: String, _ event: String) throws -> (Int, String) {
        let response = try CurlEasy(options: .init()).perform(
            HTTPRequest(
                method: .post, url: emulator + "/v3/events",
                headers: [("Content-Type", "application/json"), ("Authorization", "Bearer \(token)")],
                body: Array(event.utf8)))
        return (response.status, String(decoding: response.body, as: UTF8.self))
    }

    @Test func theGatewayTakesWhatAmazonsSchemaTakesAndRefusesTheRest() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator()
        let token = try Self.gatewayToken(harness, emulator, customer: "amzn1.account.ONE")
        func event(_ id: String, _ change: (String) -> String = { $0 }) -> String {
            change(
                Self.changeReport.replacingOccurrences(of: "TOKEN", with: token).replacingOccurrences(
                    of: "MID", with: id))
        }
        #expect(try Self.send(emulator, token: token, event("m-1")).0 == 202)
        // Each fault Amazon's schema refuses, planted in a copy of the event it took.
        let planted: [(String, (String) -> String)] = [
            (
                "a level of an unknown type",
                { $0.replacingOccurrences(of: #""@type": "Percentage""#, with: #""@type": "Liters""#) }
            ),
            ("a percentage over 100", { $0.replacingOccurrences(of: #""value": 40"#, with: #""value": 140"#) }),
            ("a time without its zone", { $0.replacingOccurrences(of: "09:12:03Z", with: "09:12:03") }),
            (
                "a header field Alexa does not know",
                { $0.replacingOccurrences(of: #""messageId""#, with: #""sequence": 1, "messageId""#) }
            ),
            (
                "another token in the scope",
                { $0.replacingOccurrences(of: #""token": "\#(token)""#, with: #""token": "other""#) }
            ),
            ("no cause", { $0.replacingOccurrences(of: #""cause": {"type": "PHYSICAL_INTERACTION"}, "#, with: "") }),
        ]
        for (index, (what, plant)) in planted.enumerated() {
            let (status, body) = try Self.send(emulator, token: token, event("m-bad-\(index)", plant))
            #expect(status == 400 && body.contains("INVALID_REQUEST_EXCEPTION"), "\(what): \(status) \(body)")
        }
        // A token that is not the gateway's, and one that expired: 401 INVALID_ACCESS_TOKEN_EXCEPTION.
        var (status, body) = try Self.send(emulator, token: "Atza|nobody", event("m-2"))
        #expect(status == 401 && body.contains("INVALID_ACCESS_TOKEN_EXCEPTION"))
        _ = try harness.emulator(emulator, .post, "/admin/skill/expire-tokens")
        (status, body) = try Self.send(emulator, token: token, event("m-3"))
        #expect(status == 401 && body.contains("INVALID_ACCESS_TOKEN_EXCEPTION"))
        // The customer disabled the skill: 403 SKILL_DISABLED_EXCEPTION.
        let fresh = try Self.gatewayToken(harness, emulator, customer: "amzn1.account.ONE")
        _ = try harness.emulator(emulator, .post, "/admin/skill/disable", body: #"{"customer":"amzn1.account.ONE"}"#)
        (status, body) = try Self.send(
            emulator, token: fresh, Self.changeReport.replacingOccurrences(of: "TOKEN", with: fresh))
        #expect(status == 403 && body.contains("SKILL_DISABLED_EXCEPTION"))
        let gateway = try harness.emulator(emulator, .get, "/admin/gateway")
        #expect((gateway["accepted"] as? [Any])?.count == 1)
        #expect((gateway["refusals"] as? [Any])?.count == planted.count + 3)
    }

    @Test func anAccountLinkingTokenNamesItsCustomer() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator()
        let link = try harness.emulator(
            emulator, .post, "/admin/skill/link", body: #"{"customer":"amzn1.account.TWO"}"#)
        let token = try #require(link["token"] as? String)
        let profile = try CurlEasy(options: .init()).perform(
            HTTPRequest(method: .get, url: emulator + "/user/profile", headers: [("Authorization", "Bearer \(token)")]))
        #expect(profile.status == 200)
        #expect(String(decoding: profile.body, as: UTF8.self).contains("amzn1.account.TWO"))
        let stranger = try CurlEasy(options: .init()).perform(
            HTTPRequest(method: .get, url: emulator + "/user/profile", headers: [("Authorization", "Bearer nobody")]))
        #expect(stranger.status == 401)
    }
}
