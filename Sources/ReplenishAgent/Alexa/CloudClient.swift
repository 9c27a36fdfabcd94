import FoundationEssentials

/// The maker's cloud as the unit speaks to it (program alexa; docs/protocol.md, "Reports to the maker's
/// cloud"): HTTPS with the unit's certificate (mutual TLS, through the libcurl the agent already links), JSON
/// both ways. `POST /v1/units/{unit}/reports` sends a report; `GET /v1/units/{unit}` asks whether the unit is
/// claimed. Each call's failure is an `AgentError` that says what to do about it (the reporter retries every one).
struct CloudClient: Sendable {
    let http: any HTTPClient
    /// `alexa.cloudURL`, without a trailing slash.
    let base: String
    let unit: String

    init(http: any HTTPClient, settings: AgentConfig.AlexaSettings) {
        self.http = http
        var base = settings.cloudURL.text
        while base.hasSuffix("/") { base.removeLast() }
        self.base = base
        unit = settings.unitId
    }

    /// The libcurl lane of the reports: the unit's certificate and key on every connection.
    static func lane(config: AgentConfig, settings: AgentConfig.AlexaSettings) throws(AgentError) -> CurlHTTPClient {
        try CurlHTTPClient(
            options: .init(
                caFile: config.caFile, clientCertificateFile: settings.certificateFile,
                clientKeyFile: settings.keyFile),
            name: "cloud-lane")
    }

    func send(_ report: SupplyReport) async throws(AgentError) -> CloudAnswer {
        let body: [UInt8]
        do { body = Array(try JSONEncoder().encode(report)) } catch {
            throw AgentError(.invalidInput, "the report could not be encoded: \(error)")
        }
        let answer = try await call(
            HTTPRequest(
                method: .post, url: "\(base)/v1/units/\(unit)/reports",
                headers: [("Content-Type", "application/json")], body: body, timeoutSeconds: 30))
        guard answer.acknowledged == report.sequence else {
            throw AgentError(
                .server,
                "the cloud answered report \(report.sequence) without acknowledging it (acknowledged: \(answer.acknowledged.map(String.init) ?? "none"))"
            )
        }
        return answer
    }

    /// Whether a customer has claimed the unit.
    func claimed() async throws(AgentError) -> Bool {
        let answer = try await call(HTTPRequest(method: .get, url: "\(base)/v1/units/\(unit)", timeoutSeconds: 30))
        guard let claimed = answer.claimed else {
            throw AgentError(.server, "the cloud's answer about the unit does not say whether it is claimed")
        }
        return claimed
    }

    /// The `Retry-After` a failed call carried.
    static func retryAfter(_ error: AgentError) -> Duration? { error.retryAfter }

    private func call(_ request: HTTPRequest) async throws(AgentError) -> CloudAnswer {
        let response: HTTPResponse
        do { response = try await http.send(request) } catch { throw Self.explained(error) }
        switch response.status {
        case 200:
            do { return try JSONDecoder().decode(CloudAnswer.self, from: Data(response.body)) } catch {
                throw AgentError(.server, "the cloud's answer (200) is not the JSON the protocol gives")
            }
        case 429, 500...599:
            throw AgentError(
                .server, "the cloud answered \(response.status)\(Self.reason(response))",
                retryAfter: response.retryAfter)
        default:
            throw AgentError(.accessDenied, "the cloud refused the call: \(response.status)\(Self.reason(response))")
        }
    }

    /// The cloud's `{"message": …}`, if it gave one (at most 200 characters, one line).
    private static func reason(_ response: HTTPResponse) -> String {
        struct Message: Decodable { var message: String? }
        guard let message = try? JSONDecoder().decode(Message.self, from: Data(response.body)).message,
            !message.isEmpty
        else { return "" }
        return ": " + String(message.prefix(200).map { $0.isNewline ? " " : $0 })
    }

    /// A TLS failure says what the maker can check: the unit's certificate and key, or the cloud's trust in it.
    static func explained(_ error: AgentError) -> AgentError {
        guard let curl = error.curl else { return error }
        switch curl.code {
        case CurlError.clientCertificateProblem:
            return AgentError(
                .configuration,
                "the unit's certificate or key could not be used (alexa.certificateFile, alexa.keyFile): \(curl.description)",
                cause: curl)
        case CurlError.tlsConnectFailed, CurlError.receiveFailed:
            return AgentError(
                .network,
                "the TLS connection to the cloud failed; if it persists, the cloud may not trust the unit's certificate: \(curl.description)",
                cause: curl)
        default:
            return error
        }
    }
}
