import Testing

@testable import ReplenishAgent

/// What LWA's answers may put into the agent: tokens only from the token alphabet (docs/protocol.md),
/// so that nothing LWA sends can end up as a second header line behind `Authorization: Bearer`.
@Suite(.tags(.unit)) struct LWAClientTests {
    func lwa(answering body: String) throws -> (LWAClient, ScriptedHTTPClient) {
        let http = ScriptedHTTPClient { _ in json(200, body) }
        return (
            LWAClient(http: http, tokenURL: try EndpointURL("http://127.0.0.1:1/auth/o2/token"), clientSecret: nil),
            http
        )
    }

    /// The JSON text of an LWA success answer with these (already JSON-escaped) tokens.
    func answer(access: String, refresh: String = "Atzr|fine") -> String {
        #"{"access_token":"\#(access)","refresh_token":"\#(refresh)","token_type":"bearer","expires_in":3600}"#
    }

    @Test(arguments: [
        ("CR LF in the access token", #"Atza|abc\r\nX-Injected: 1"#, "Atzr|fine"),
        ("LF alone", #"Atza|abc\nX: 1"#, "Atzr|fine"),
        ("a NUL", #"Atza|abc\u0000"#, "Atzr|fine"),
        ("a tab", #"Atza|a\tb"#, "Atzr|fine"),
        ("a space", "Atza|a b", "Atzr|fine"),
        ("DEL", #"Atza|a\u007f"#, "Atzr|fine"),
        ("non-ASCII", "Atza|caf\u{e9}", "Atzr|fine"),
        ("over 2048 bytes", "Atza|" + String(repeating: "x", count: 2044), "Atzr|fine"),
        ("CR LF in the refresh token", "Atza|fine", #"Atzr|abc\r\nX: 1"#),
        ("a refresh token over 2048 bytes", "Atza|fine", "Atzr|" + String(repeating: "y", count: 2044)),
    ])
    func aTokenOutsideTheAlphabetIsRefusedAsAServerError(what: String, access: String, refresh: String) async throws {
        let (lwa, http) = try lwa(answering: answer(access: access, refresh: refresh))
        do {
            _ = try await lwa.refresh(refreshToken: Secret("Atzr|old"), clientId: "client")
            Issue.record("\(what): accepted")
        } catch {
            #expect(error.code == .server, "\(what)")
            #expect(
                !error.message.contains("abc") && !error.message.contains("xxxx"),
                "\(what): the token is in the message")
        }
        #expect(http.requests.count == 1)
        // Pairing takes the same road.
        do {
            _ = try await lwa.redeem(
                code: Secret("ANcode"), redirectURI: "https://app/redirect", clientId: "client", verifier: Secret("v"))
            Issue.record("\(what): accepted at pairing")
        } catch { #expect(error.code == .server, "\(what)") }
    }

    /// #29.10: a key given twice is read differently by different JSON readers (the first wins here): the
    /// answer is refused, and neither token is named in the error.
    @Test(arguments: ["access_token", "refresh_token", "expires_in"])
    func anAnswerWithAKeyGivenTwiceIsRefused(key: String) async throws {
        let value = key == "expires_in" ? "60" : #""Atza|second""#
        let body = answer(access: "Atza|first", refresh: "Atzr|first").dropLast() + #","\#(key)":\#(value)}"#
        let (lwa, _) = try lwa(answering: String(body))
        do {
            _ = try await lwa.refresh(refreshToken: Secret("Atzr|old"), clientId: "client")
            Issue.record("\(key) twice: accepted")
        } catch {
            #expect(error.code == .server && error.message.contains("given twice (\(key))"), "\(error.message)")
            #expect(!error.message.contains("first") && !error.message.contains("second"))
        }
    }

    @Test func tokensAtTheEdgesOfTheAlphabetAreKept() async throws {
        let longest = "Atza|" + String(repeating: "x", count: 2043)
        let (lwa, _) = try lwa(answering: answer(access: longest, refresh: #"Atzr|!~\"{}"#))
        let grant = try await lwa.refresh(refreshToken: Secret("Atzr|old"), clientId: "client")
        #expect(grant.accessToken == Secret(longest))
        #expect(grant.refreshToken == Secret(#"Atzr|!~"{}"#))
        #expect(LWAClient.isTokenText("!") && !LWAClient.isTokenText("") && !LWAClient.isTokenText(" "))
    }
}
