import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// The tokens LWA gives the skill for a customer's event gateway (AcceptGrant's code, or a refresh).
public struct LWATokens: Sendable, Equatable {
    public var accessToken: String
    public var refreshToken: String
    public var expiresIn: Int

    public init(accessToken: String, refreshToken: String, expiresIn: Int) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresIn = expiresIn
    }
}

/// Login with Amazon as the skill meets it: the grant code exchanged and refreshed with the skill's Alexa Skill
/// Messaging client, and the customer named by an account-linking token (LWA is the skill's OAuth provider).
public protocol LoginWithAmazon: Sendable {
    func exchange(code: String) async throws -> LWATokens
    func refresh(refreshToken: String) async throws -> LWATokens
    /// The customer's LWA user id for an account-linking access token.
    func customer(accessToken: String) async throws -> String
}

/// Why LWA did not give tokens: it refused (the code or refresh token is not valid: asking again will not
/// help), or it did not answer as it should (try later).
public enum LWAFailure: Error, Sendable, Equatable {
    case refused(String)
    case unavailable(String)
}

/// `LoginWithAmazon` over HTTPS with AsyncHTTPClient.
public struct HTTPLoginWithAmazon: LoginWithAmazon {
    let http: HTTPClient
    let tokenURL: String
    let profileURL: String
    let clientId: String
    let clientSecret: String

    public init(http: HTTPClient, tokenURL: String, profileURL: String, clientId: String, clientSecret: String) {
        self.http = http
        self.tokenURL = tokenURL
        self.profileURL = profileURL
        self.clientId = clientId
        self.clientSecret = clientSecret
    }

    public func exchange(code: String) async throws -> LWATokens {
        try await token(["grant_type": "authorization_code", "code": code])
    }

    public func refresh(refreshToken: String) async throws -> LWATokens {
        try await token(["grant_type": "refresh_token", "refresh_token": refreshToken])
    }

    func token(_ fields: [String: String]) async throws -> LWATokens {
        var all = fields
        all["client_id"] = clientId
        all["client_secret"] = clientSecret
        var request = HTTPClientRequest(url: tokenURL)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded;charset=UTF-8")
        request.body = .bytes(ByteBuffer(string: Self.form(all)))
        let (status, body) = try await send(request)
        guard status == 200 else {
            // Only a code or refresh token LWA no longer takes is refused for good; anything else (the skill's own
            // client refused, a server error) may pass later and drops nothing.
            let error = body["error"]?.string ?? "HTTP \(status)"
            throw error == "invalid_grant" ? LWAFailure.refused(error) : LWAFailure.unavailable(error)
        }
        guard let access = body["access_token"]?.string, let refresh = body["refresh_token"]?.string,
            let expiresIn = body["expires_in"]?.number, expiresIn > 0
        else { throw LWAFailure.unavailable("LWA's token answer lacks access_token, refresh_token or expires_in") }
        return LWATokens(accessToken: access, refreshToken: refresh, expiresIn: Int(expiresIn))
    }

    public func customer(accessToken: String) async throws -> String {
        var request = HTTPClientRequest(url: profileURL)
        request.headers.add(name: "Authorization", value: "Bearer \(accessToken)")
        let (status, body) = try await send(request)
        guard status == 200 else {
            throw status == 400 || status == 401
                ? LWAFailure.refused("HTTP \(status)") : LWAFailure.unavailable("HTTP \(status)")
        }
        guard let user = body["user_id"]?.string, !user.isEmpty else {
            throw LWAFailure.unavailable("LWA's profile answer lacks user_id")
        }
        return user
    }

    func send(_ request: HTTPClientRequest) async throws -> (UInt, JSON) {
        do {
            let response = try await http.execute(request, timeout: .seconds(10))
            let bytes = try await response.body.collect(upTo: 64 * 1024)
            return (response.status.code, (try? JSON.parse(bytes.readableBytesView)) ?? .null)
        } catch {
            throw LWAFailure.unavailable("no answer from LWA: \(type(of: error))")
        }
    }

    /// `application/x-www-form-urlencoded` (RFC 1866 with RFC 3986's unreserved set).
    static func form(_ fields: [String: String]) -> String {
        let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~".utf8)
        func escape(_ text: String) -> String {
            text.utf8.map { unreserved.contains($0) ? String(UnicodeScalar($0)) : String(format: "%%%02X", $0) }
                .joined()
        }
        return fields.sorted { $0.key < $1.key }.map { "\(escape($0.key))=\(escape($0.value))" }.joined(separator: "&")
    }
}
