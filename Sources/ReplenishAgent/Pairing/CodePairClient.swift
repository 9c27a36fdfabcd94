import FoundationEssentials

/// The two LWA calls of code-based linking (docs/protocol.md): `POST {lwa.codePairURL}` for a code pair,
/// and the token endpoint's `device_code` grant to learn whether the customer entered the code. Both go on
/// the LWA lane (`lwa.http`). Answers become `CodeLinking` events; the device code never reaches a message.
struct CodePairClient: Sendable {
    let lwa: LWAClient
    let codePairURL: EndpointURL

    /// LWA's code pair, checked.
    struct Issued: Sendable, Equatable {
        var userCode: String
        var deviceCode: Secret
        var verificationURI: String
        var expiresIn: Duration
        var interval: Duration
    }

    /// Why a request got no useful answer.
    enum Failure: Sendable, Equatable, Error {
        /// No answer, 5xx, 429, or an answer the agent cannot read: the same request later, after the
        /// backoff (and `retryAfter`, when LWA gave one).
        case transient(reason: String, retryAfter: Duration?)
        /// `invalid_client`, `unauthorized_client`, `unsupported_grant_type`: the configuration is wrong.
        case configuration(reason: String)
        /// Any other refusal (`invalid_grant`, `access_denied`, `invalid_request`, `invalid_scope`…).
        case refused(reason: String)

        var reason: String {
            switch self {
            case .transient(let reason, _), .configuration(let reason), .refused(let reason): reason
            }
        }
    }

    /// LWA's answer to one poll with the `device_code` grant.
    enum PollAnswer: Sendable, Equatable {
        /// `authorization_pending`: the customer has not entered the code yet.
        case pending
        /// `slow_down`: polled too often.
        case slowDown
        /// `invalid_code_pair` (RFC 8628's `expired_token` too): the pair is over.
        case invalidCodePair
        /// The customer entered the code.
        case granted(TokenGrant)
        case failed(Failure)
    }

    /// `{"dash:replenish":{"device_model":M,"serial":S,"is_test_device":B,"should_include_non_live":B}}`: the
    /// same scope data the companion app builds from the device's `deviceInfo` (docs/companion-app.md), its
    /// flags from the phase (`AgentConfig.Phase`), as `PairingCoordinator` reports them. A released device (the
    /// `production` phase) passes no flags at all, as Amazon's sample devices do: both keys are left out.
    struct ScopeData: Encodable {
        struct Replenish: Encodable {
            var deviceModel: String
            var serial: String
            var isTestDevice: Bool?
            var shouldIncludeNonLive: Bool?

            enum CodingKeys: String, CodingKey {
                case deviceModel = "device_model"
                case serial
                case isTestDevice = "is_test_device"
                case shouldIncludeNonLive = "should_include_non_live"
            }
        }

        var replenish: Replenish

        enum CodingKeys: String, CodingKey { case replenish = "dash:replenish" }

        init(device: AgentConfig.Device) {
            let released = device.phase == .production
            replenish = Replenish(
                deviceModel: device.model, serial: device.serial,
                isTestDevice: released ? nil : device.phase.isTestDevice,
                shouldIncludeNonLive: released ? nil : device.phase.shouldIncludeNonLive)
        }

        var json: String {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            // Strings and booleans only: encoding cannot fail.
            return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        }
    }

    /// Asks LWA for a code pair for `device`.
    func requestCodePair(clientId: String, device: AgentConfig.Device) async -> Result<Issued, Failure> {
        let response: HTTPResponse
        do {
            response = try await post(
                codePairURL,
                [
                    ("response_type", "device_code"), ("client_id", clientId), ("scope", "dash:replenish"),
                    ("scope_data", ScopeData(device: device).json),
                ])
        } catch {
            return .failure(error)
        }
        guard response.status == 200 else { return .failure(Self.failure(response, LWAError.code(response))) }
        return Self.issued(response.body).map(Result.success)
            ?? .failure(
                .transient(
                    reason: "LWA answered the code pair request with a body the agent cannot read", retryAfter: nil))
    }

    /// Asks the token endpoint whether the customer has entered the code of `deviceCode`.
    func poll(deviceCode: Secret, userCode: String) async -> PollAnswer {
        let response: HTTPResponse
        do {
            response = try await post(
                lwa.tokenURL,
                [("grant_type", "device_code"), ("device_code", deviceCode.value), ("user_code", userCode)])
        } catch {
            return .failed(error)
        }
        if response.status == 200 {
            do { return .granted(try LWAClient.interpret(response)) } catch {
                return .failed(.transient(reason: error.message, retryAfter: nil))
            }
        }
        let code = LWAError.code(response)
        switch code {
        case "authorization_pending": return .pending
        case "slow_down": return .slowDown
        case "invalid_code_pair", "expired_token": return .invalidCodePair
        default: return .failed(Self.failure(response, code))
        }
    }

    private func post(_ url: EndpointURL, _ fields: [(String, String)]) async throws(Failure) -> HTTPResponse {
        let body = fields.map { "\($0.0)=\(CurlEasy.formEscape($0.1))" }.joined(separator: "&")
        let request = HTTPRequest(
            method: .post, url: url.text,
            headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")],
            body: Array(body.utf8), timeoutSeconds: 30)
        do { return try await lwa.http.send(request) } catch {
            if error.code == .configuration { throw .configuration(reason: error.message) }
            throw .transient(reason: error.message, retryAfter: nil)
        }
    }

    /// What a refusal means: 5xx and 429 are transient, configuration faults apart, the rest refused.
    static func failure(_ response: HTTPResponse, _ code: String?) -> Failure {
        if response.status >= 500 || response.status == 429 {
            return .transient(reason: "LWA answered \(response.status)", retryAfter: response.retryAfter)
        }
        let named = code.map(LWAClient.sanitize) ?? "status \(response.status)"
        switch code {
        case "invalid_client", "unauthorized_client", "unsupported_grant_type":
            return .configuration(reason: "LWA refused: \(named)")
        default:
            return .refused(reason: "LWA refused: \(named)")
        }
    }

    private struct Answer: Decodable {
        var userCode: String
        var deviceCode: String
        var verificationURI: String
        var expiresIn: Double
        var interval: Double?

        enum CodingKeys: String, CodingKey {
            case userCode = "user_code"
            case deviceCode = "device_code"
            case verificationURI = "verification_uri"
            case expiresIn = "expires_in"
            case interval
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            userCode = try container.decode(String.self, forKey: .userCode)
            deviceCode = try container.decode(String.self, forKey: .deviceCode)
            verificationURI = try container.decode(String.self, forKey: .verificationURI)
            // Numbers, or numbers as strings (as LWA's `expires_in` is on some pages).
            func number(_ key: CodingKeys) throws -> Double? {
                if let value = try? container.decodeIfPresent(Double.self, forKey: key) { return value }
                guard let text = try container.decodeIfPresent(String.self, forKey: key) else { return nil }
                guard let value = Double(text) else { throw AgentError(.server, "not a number") }
                return value
            }
            guard let expiresIn = try number(.expiresIn) else { throw AgentError(.server, "no expires_in") }
            self.expiresIn = expiresIn
            interval = try number(.interval)
        }
    }

    /// The code pair in a 200 answer, or nil when it is not one the device can use: the user code and the
    /// URI are shown to the customer (printable ASCII, at most 64 and 2048 bytes), the device code goes into a
    /// request body (the token alphabet), the lifetime is 1 s to a day, the interval 1 s to an hour (RFC
    /// 8628's 5 s when absent).
    static func issued(_ body: [UInt8]) -> Issued? {
        guard let answer = try? JSONDecoder().decode(Answer.self, from: Data(body)) else { return nil }
        func printable(_ text: String, limit: Int) -> Bool {
            !text.isEmpty && text.utf8.count <= limit && text.utf8.allSatisfy { (0x21...0x7E).contains($0) }
        }
        let interval = answer.interval ?? 5
        guard printable(answer.userCode, limit: 64), printable(answer.verificationURI, limit: 2048),
            LWAClient.isTokenText(answer.deviceCode), (1...86400).contains(answer.expiresIn),
            (1...3600).contains(interval)
        else { return nil }
        return Issued(
            userCode: answer.userCode, deviceCode: Secret(answer.deviceCode), verificationURI: answer.verificationURI,
            expiresIn: .milliseconds(Int64(answer.expiresIn * 1000)), interval: .milliseconds(Int64(interval * 1000)))
    }
}

/// LWA's error code in an error answer (`{"error":"…","error_description":"…"}`).
private enum LWAError {
    private struct Body: Decodable { var error: String }

    static func code(_ response: HTTPResponse) -> String? {
        (try? JSONDecoder().decode(Body.self, from: Data(response.body)))?.error
    }
}
