import AsyncHTTPClient
import Foundation
import NIOCore

/// What the gateway did with an event.
public enum GatewayOutcome: Sendable, Equatable {
    /// 202: accepted.
    case accepted
    /// INVALID_ACCESS_TOKEN_EXCEPTION: refresh the customer's token, then send again.
    case invalidToken
    /// SKILL_DISABLED_EXCEPTION: the customer disabled the skill; drop their tokens.
    case skillDisabled
    /// 429, 5xx or no answer: send again later, not before `after` when the gateway said.
    case retry(after: Duration?, reason: String)
    /// Any other refusal (INVALID_REQUEST_EXCEPTION, …): sending it again will not help.
    case refused(String)
}

/// Alexa's event gateway (`POST /v3/events`).
public protocol EventGateway: Sendable {
    func send(_ event: JSON, token: String) async -> GatewayOutcome
}

/// The gateway over HTTPS with AsyncHTTPClient, at the region's URL (`https://api.amazonalexa.com/v3/events`,
/// `api.eu.amazonalexa.com`, `api.fe.amazonalexa.com`).
public struct HTTPEventGateway: EventGateway {
    let http: HTTPClient
    let url: String

    public init(http: HTTPClient, url: String) {
        self.http = http
        self.url = url
    }

    public func send(_ event: JSON, token: String) async -> GatewayOutcome {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Content-Type", value: "application/json;charset=UTF-8")
        request.body = .bytes(ByteBuffer(string: event.text))
        let status: UInt
        let body: JSON
        let retryAfter: String?
        do {
            let response = try await http.execute(request, timeout: .seconds(10))
            status = response.status.code
            retryAfter = response.headers.first(name: "Retry-After")
            body = (try? JSON.parse(try await response.body.collect(upTo: 64 * 1024).readableBytesView)) ?? .null
        } catch {
            return .retry(after: nil, reason: "no answer from the gateway: \(type(of: error))")
        }
        return Self.outcome(status: status, body: body, retryAfter: retryAfter)
    }

    /// The outcome of an answer: by the error's code where the body has one (Amazon's codes, not the status,
    /// say what to do), by the status otherwise.
    static func outcome(status: UInt, body: JSON, retryAfter: String?) -> GatewayOutcome {
        if status == 202 || status == 200 { return .accepted }
        let code = body.at("payload.code")?.string ?? ""
        switch code {
        case "INVALID_ACCESS_TOKEN_EXCEPTION": return .invalidToken
        case "SKILL_DISABLED_EXCEPTION": return .skillDisabled
        default: break
        }
        if status == 429 || status >= 500 {
            let after = retryAfter.flatMap { Int($0) }.map { Duration.seconds(min(max($0, 1), 3600)) }
            return .retry(after: after, reason: code.isEmpty ? "HTTP \(status)" : code)
        }
        return .refused(code.isEmpty ? "HTTP \(status)" : code)
    }
}
