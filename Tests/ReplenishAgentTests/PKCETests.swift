import Testing

@testable import ReplenishAgent

@Suite(.tags(.unit)) struct PKCETests {
    @Test func rfc7636AppendixBVector() {
        let pair = PKCE(verifier: Secret("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"))
        #expect(pair.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        #expect(pair.method == "S256")
    }

    @Test func freshVerifiersAreLongRandomAndUnreserved() {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        let first = PKCE()
        let second = PKCE()
        #expect(first.verifier.value.count == 43)
        #expect(first.verifier.value.allSatisfy { allowed.contains($0) })
        #expect(first.verifier != second.verifier)
        #expect(first.challenge != second.challenge)
        #expect(!first.challenge.contains("="))
        #expect(PKCE(verifier: first.verifier).challenge == first.challenge)
    }

    @Test func secretsNeverPrint() {
        let secret = Secret("Atzr|very-secret")
        #expect("\(secret)" == "<redacted>")
        #expect(String(describing: secret) == "<redacted>")
        #expect(String(reflecting: secret) == "<redacted>")
        let tokens = TokenSet(
            clientId: "c", refreshToken: secret, accessToken: Secret("Atza|also-secret"),
            accessTokenExpiresAt: 1, accessTokenLifetime: 1)
        #expect(!"\(tokens)".contains("secret"))
        #expect(!String(reflecting: tokens).contains("secret"))
    }
}
