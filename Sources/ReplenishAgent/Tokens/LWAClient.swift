import FoundationEssentials

/// Talks to the Login with Amazon token endpoint: redeems a pairing's authorization code (PKCE) and
/// refreshes access tokens. LWA's error codes become `AgentError` codes (see `AgentError.Code`), and the
/// message names LWA's code (never a token).
struct LWAClient: Sendable {
    let http: any HTTPClient
    let tokenURL: EndpointURL
    let clientSecret: Secret?

    /// Redeems an authorization code with the PKCE verifier of the session it was issued for.
    func redeem(code: Secret, redirectURI: String, clientId: String, verifier: Secret) async throws(AgentError)
        -> TokenGrant
    {
        try await post([
            ("grant_type", "authorization_code"), ("code", code.value), ("redirect_uri", redirectURI),
            ("client_id", clientId), ("code_verifier", verifier.value),
        ])
    }

    /// Exchanges the refresh token for a new access token (and perhaps a new refresh token).
    func refresh(refreshToken: Secret, clientId: String) async throws(AgentError) -> TokenGrant {
        var fields = [("grant_type", "refresh_token"), ("refresh_token", refreshToken.value), ("client_id", clientId)]
        if let clientSecret { fields.append(("client_secret", clientSecret.value)) }
        return try await post(fields)
    }

    /// What `checkedAtPairing` found: the grant to keep, and why the client secret is not checked yet (LWA did
    /// not answer the check: a 5xx, a dropped connection, a timeout), nil when it was, or none is configured.
    struct CheckedGrant: Sendable {
        var grant: TokenGrant
        var uncheckedBecause: String?
    }

    /// With a client secret configured, one refresh right after a code is redeemed: LWA reads the secret only on
    /// a refresh, so a secret that does not belong to the client id would otherwise let the pairing succeed and
    /// stop the ordering an hour later, at the first scheduled refresh (`invalid_client`). Only LWA's definite
    /// refusal of the secret (`invalid_client`) fails the pairing. A check LWA did not answer says nothing of
    /// the secret, and the code is redeemed already (a retry of the app would get `invalid_grant`, and LWA holds
    /// a live refresh token for it): the redeemed grant is kept, unchecked, and the token manager checks again
    /// at once (`TokenManager.install`). Returns the grant to keep: the refresh's access token, and its refresh
    /// token when LWA rotated the one the code gave.
    func checkedAtPairing(_ grant: TokenGrant, clientId: String) async throws(AgentError) -> CheckedGrant {
        guard clientSecret != nil, let redeemed = grant.refreshToken else { return .init(grant: grant) }
        let refreshed: TokenGrant
        do { refreshed = try await refresh(refreshToken: redeemed, clientId: clientId) } catch {
            switch error.code {
            case .unauthorizedClient:
                throw AgentError(
                    .unauthorizedClient, "lwa.clientSecret is not this client id's secret (\(error.message))",
                    cause: error)
            case .network, .server:
                return .init(grant: grant, uncheckedBecause: error.message)
            default:
                throw error
            }
        }
        return .init(
            grant: TokenGrant(
                accessToken: refreshed.accessToken, refreshToken: refreshed.refreshToken ?? redeemed,
                expiresIn: refreshed.expiresIn))
    }

    private func post(_ fields: [(String, String)]) async throws(AgentError) -> TokenGrant {
        let body = fields.map { "\($0.0)=\(CurlEasy.formEscape($0.1))" }.joined(separator: "&")
        let request = HTTPRequest(
            method: .post, url: tokenURL.text,
            headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")],
            body: Array(body.utf8), timeoutSeconds: 30)
        let response = try await http.send(request)
        return try Self.interpret(response)
    }

    private struct Success: Decodable {
        var accessToken: String
        var refreshToken: String?
        var expiresIn: Double

        enum CodingKeys: String, CodingKey {
            case accessToken = "access_token"
            case refreshToken = "refresh_token"
            case expiresIn = "expires_in"
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            accessToken = try container.decode(String.self, forKey: .accessToken)
            refreshToken = try container.decodeIfPresent(String.self, forKey: .refreshToken)
            // Amazon's pages show expires_in both as a number and as a string ("3600").
            if let number = try? container.decode(Double.self, forKey: .expiresIn) {
                expiresIn = number
            } else if let number = Double(try container.decode(String.self, forKey: .expiresIn)) {
                expiresIn = number
            } else {
                throw AgentError(.server, "expires_in is not a number")
            }
        }
    }

    private struct Failure: Decodable {
        var error: String
    }

    /// Turns an LWA answer into a grant or a typed error.
    static func interpret(_ response: HTTPResponse) throws(AgentError) -> TokenGrant {
        if response.status == 200 {
            // A key given twice (two access tokens, two lifetimes) is read differently by different readers
            // (FoundationEssentials keeps the first): refused, as the config and board files refuse it.
            if case .valid(let duplicates) = JSONSyntax.inspect(response.body), !duplicates.isEmpty {
                let names = duplicates.map(sanitize).joined(separator: ", ")
                throw AgentError(.server, "LWA answered 200 with a key given twice (\(names))")
            }
            guard let success = try? JSONDecoder().decode(Success.self, from: Data(response.body)) else {
                throw AgentError(.server, "LWA answered 200 with a body the agent cannot read")
            }
            // A token goes into an `Authorization` header and into tokens.json: a CR, LF or any other control
            // character would inject a header, so a token outside the alphabet is refused before it is kept.
            guard Self.isTokenText(success.accessToken),
                success.refreshToken.map({ $0.isEmpty || Self.isTokenText($0) }) ?? true
            else {
                throw AgentError(
                    .server, "LWA answered 200 with a token that is empty, over 2048 bytes or not printable ASCII")
            }
            guard success.expiresIn >= 1, success.expiresIn <= 366 * 86400 else {
                throw AgentError(.server, "LWA answered 200 with an out-of-range token lifetime")
            }
            return TokenGrant(
                accessToken: Secret(success.accessToken),
                refreshToken: success.refreshToken.flatMap { $0.isEmpty ? nil : Secret($0) },
                expiresIn: success.expiresIn)
        }
        if response.status >= 500 || response.status == 429 {
            throw AgentError(.server, "LWA answered \(response.status)", retryAfter: response.retryAfter)
        }
        let code = (try? JSONDecoder().decode(Failure.self, from: Data(response.body)))?.error
        let safeCode = code.map(sanitize) ?? "status \(response.status)"
        switch code {
        case "invalid_grant":
            throw AgentError(.applicationNotAuthorized, "LWA refused: invalid_grant")
        case "invalid_client", "unauthorized_client", "unsupported_grant_type":
            throw AgentError(.unauthorizedClient, "LWA refused: \(safeCode)")
        case "invalid_request", "invalid_scope":
            throw AgentError(.invalidInput, "LWA refused: \(safeCode)")
        default:
            throw AgentError(.accessDenied, "LWA refused: \(safeCode)")
        }
    }

    /// The token alphabet (docs/protocol.md): 1 to 2048 bytes of printable ASCII without spaces
    /// (`!` to `~`), so that a token can never end a header line or start another.
    static func isTokenText(_ token: String) -> Bool {
        let bytes = token.utf8
        return !bytes.isEmpty && bytes.count <= 2048 && bytes.allSatisfy { (0x21...0x7E).contains($0) }
    }

    /// An error code from a server goes into a log line: keep it short and printable.
    static func sanitize(_ text: String) -> String {
        String(text.prefix(64).filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") })
    }
}
