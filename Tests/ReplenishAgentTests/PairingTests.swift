import Foundation
import NIOHTTP1
import Synchronization
import Testing

@testable import ReplenishAgent

/// The companion app's pairing through `PairingCoordinator` with in-memory doubles: the newest session's
/// verifier, the answers for malformed requests, and LWA's refusals and outages leaving the device pairable.
@Suite(.tags(.unit)) struct PairingTests {
    let clock = ManualClock()

    func coordinator(_ http: ScriptedHTTPClient, store: MemoryTokenStore = MemoryTokenStore()) throws
        -> PairingCoordinator<ManualClock>
    {
        let lwa = LWAClient(
            http: http, tokenURL: try EndpointURL("http://127.0.0.1:1/auth/o2/token"), clientSecret: nil)
        let tokens = try TokenManager(
            store: store, lwa: lwa, clock: clock, wallTime: { 1000 },
            logger: .init(label: "test"))
        return PairingCoordinator(
            device: .init(serial: "SN1", model: "M1", phase: .certification), clientId: "cid", lwa: lwa,
            tokens: tokens, clock: clock, deviceNames: { ["192.168.1.20", "device", "device.local", "localhost"] },
            logger: .init(label: "test"))
    }

    /// A request as the companion app sends it: Host naming the device, JSON body.
    static func request(
        _ method: HTTPMethod, _ path: String, body: String = "", peer: String = "192.168.1.7",
        headers: [(String, String)] = [("Host", "192.168.1.20:8642"), ("Content-Type", "application/json")]
    ) -> ServerRequest {
        ServerRequest(
            method: method, path: path, body: Array(body.utf8), headers: HTTPHeaders(headers), peer: peer)
    }

    struct Info: Decodable {
        var serial: String, deviceModel: String, isTestDevice: Bool, shouldIncludeNonLive: Bool
        var codeChallenge: String, codeChallengeMethod: String, sessionId: String
    }

    func deviceInfo(_ pairing: PairingCoordinator<ManualClock>) async throws -> Info {
        let response = await pairing.handle(Self.request(.GET, "/provision/deviceInfo"))
        #expect(response.status == 200)
        return try JSONDecoder().decode(Info.self, from: Data(response.body))
    }

    func companion(_ pairing: PairingCoordinator<ManualClock>, _ body: String) async -> ServerResponse {
        await pairing.handle(Self.request(.POST, "/provision/companionInfo", body: body))
    }

    @Test func pairsWithTheNewestSessionsVerifier() async throws {
        let store = MemoryTokenStore()
        let http = ScriptedHTTPClient { _ in
            json(200, #"{"access_token":"Atza|a","refresh_token":"Atzr|r","expires_in":3600}"#)
        }
        let pairing = try coordinator(http, store: store)
        let old = try await deviceInfo(pairing)
        clock.advance(by: .seconds(2))
        let info = try await deviceInfo(pairing)
        #expect(info.serial == "SN1" && info.deviceModel == "M1" && !info.isTestDevice && info.shouldIncludeNonLive)
        #expect(info.codeChallengeMethod == "S256" && info.codeChallenge != old.codeChallenge)
        let stale = await companion(
            pairing, #"{"sessionId":"\#(old.sessionId)","authCode":"c","clientId":"cid","redirectUri":"r"}"#)
        #expect(stale.status == 400 && String(decoding: stale.body, as: UTF8.self).contains("INCORRECT_SESSION_ID"))
        let ok = await companion(
            pairing,
            #"{"sessionId":"\#(info.sessionId)","authCode":"ANcode","clientId":"cid","redirectUri":"https://r"}"#)
        #expect(ok.status == 204)
        #expect(store.tokens?.refreshToken == Secret("Atzr|r") && store.tokens?.clientId == "cid")
        // The verifier went to LWA and hashes to the challenge the app saw.
        let body = String(decoding: http.requests.last?.body ?? [], as: UTF8.self)
        let verifier = try #require(body.split(separator: "&").first { $0.hasPrefix("code_verifier=") }?.dropFirst(14))
        #expect(PKCE(verifier: Secret(String(verifier))).challenge == info.codeChallenge)
        #expect(body.contains("grant_type=authorization_code") && body.contains("code=ANcode"))
        // Once paired, the endpoints are gone.
        clock.advance(by: .seconds(2))
        let after = await pairing.handle(Self.request(.GET, "/provision/deviceInfo"))
        #expect(after.status == 404)
    }

    @Test(arguments: [
        "", "[]", "nope", #"{"sessionId":"s"}"#, #"{"sessionId":1,"authCode":"c","clientId":"i","redirectUri":"r"}"#,
        #"{"sessionId":"s","authCode":"has space","clientId":"i","redirectUri":"r"}"#,
        #"{"sessionId":"s","authCode":"","clientId":"i","redirectUri":"r"}"#,
    ])
    func malformedRequestsAreInvalidParam(body: String) async throws {
        let pairing = try coordinator(
            ScriptedHTTPClient { (_) throws(AgentError) -> HTTPResponse in
                throw AgentError(.network, "must not be called")
            })
        _ = try await deviceInfo(pairing)
        let response = await companion(pairing, body)
        #expect(response.status == 400)
        #expect(String(decoding: response.body, as: UTF8.self).contains("INVALID_PARAM"))
    }

    /// #40.5: with a client secret set, the pairing's check refresh gets no answer LWA stands by (a 503, a
    /// dropped connection): the code is redeemed already, so the pairing holds (204, the tokens stored) instead of
    /// burning the customer's code, `status` says the secret is not checked yet, and a refresh checks it at once.
    /// LWA's definite refusal (`invalid_client`) still fails the pairing.
    @Test(arguments: ["503", "dropped", "invalid_client"])
    func aCheckLWADoesNotAnswerKeepsThePairing(check: String) async throws {
        let refreshes = Mutex(0)
        let http = ScriptedHTTPClient { (request) throws(AgentError) -> HTTPResponse in
            let body = String(decoding: request.body ?? [], as: UTF8.self)
            if body.contains("grant_type=authorization_code") {
                return json(200, #"{"access_token":"Atza|a","refresh_token":"Atzr|r","expires_in":3600}"#)
            }
            let first = refreshes.withLock {
                $0 += 1
                return $0 == 1
            }
            guard first else { return json(200, #"{"access_token":"Atza|b","expires_in":3600}"#) }
            switch check {
            case "503": return json(503, "")
            case "dropped": throw AgentError(.network, "connection reset")
            default: return json(401, #"{"error":"invalid_client"}"#)
            }
        }
        let store = MemoryTokenStore()
        let lwa = LWAClient(
            http: http, tokenURL: try EndpointURL("http://127.0.0.1:1/auth/o2/token"),
            clientSecret: Secret("the-secret"))
        let tokens = try TokenManager(
            store: store, lwa: lwa, clock: clock, wallTime: { 1000 }, logger: .init(label: "test"))
        let pairing = PairingCoordinator(
            device: .init(serial: "SN1", model: "M1", phase: .certification), clientId: "cid", lwa: lwa,
            tokens: tokens, clock: clock, deviceNames: { ["192.168.1.20", "device", "device.local", "localhost"] },
            logger: .init(label: "test"))
        let info = try await deviceInfo(pairing)
        let answer = await companion(
            pairing, #"{"sessionId":"\#(info.sessionId)","authCode":"c","clientId":"cid","redirectUri":"r"}"#)
        if check == "invalid_client" {
            #expect(answer.status == 400 && String(decoding: answer.body, as: UTF8.self).contains("invalid_client"))
            #expect(store.tokens == nil)
            return
        }
        #expect(answer.status == 204, "\(String(decoding: answer.body, as: UTF8.self))")
        #expect(store.tokens?.refreshToken == Secret("Atzr|r"))
        let reason = await tokens.state.reason ?? ""
        #expect(reason.contains("lwa.clientSecret is not checked yet"), "\(reason)")
        // Checked again at once: the access token counts as expired, so the next use refreshes (with the secret).
        #expect(try await tokens.accessToken() == Secret("Atza|b"))
        #expect(refreshes.withLock { $0 } == 2)
        #expect(await tokens.state.reason == nil)
    }

    @Test func lwaRefusalIs400AndUnreachableIs502AndTheDeviceStaysPairable() async throws {
        let answers = Mutex([AgentError?.none, AgentError(.network, "connection refused")])
        let http = ScriptedHTTPClient { (_) throws(AgentError) -> HTTPResponse in
            if let error = answers.withLock({ $0.removeFirst() }) { throw error }
            return json(400, #"{"error":"invalid_grant","error_description":"code expired"}"#)
        }
        let store = MemoryTokenStore()
        let pairing = try coordinator(http, store: store)
        let info = try await deviceInfo(pairing)
        let body = #"{"sessionId":"\#(info.sessionId)","authCode":"c","clientId":"cid","redirectUri":"r"}"#
        let refused = await companion(pairing, body)
        #expect(refused.status == 400)
        let text = String(decoding: refused.body, as: UTF8.self)
        #expect(text.contains("LWA_ERROR") && text.contains("invalid_grant"))
        let unreachable = await companion(pairing, body)
        #expect(unreachable.status == 502 && String(decoding: unreachable.body, as: UTF8.self).contains("LWA_ERROR"))
        #expect(store.tokens == nil)
        clock.advance(by: .seconds(2))
        #expect(try await deviceInfo(pairing).sessionId != info.sessionId)
    }
}
