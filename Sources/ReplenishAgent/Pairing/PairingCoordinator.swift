import Logging
import NIOHTTP1

/// The device's side of pairing with the companion app (PROTOCOL.md section 5). Each `deviceInfo` starts a
/// new session with a fresh PKCE pair (only the newest session is valid); `companionInfo` redeems the app's
/// authorization code with that session's verifier and answers 204 only once the tokens are durable.
actor PairingCoordinator<C: Clock> where C.Duration == Duration {
    private struct Session {
        let id: String
        let pkce: PKCE
    }

    private let device: AgentConfig.Device
    private let lwa: LWAClient
    private let tokens: TokenManager<C>
    private let logger: Logger
    private var session: Session?
    private var redeeming = false

    init(device: AgentConfig.Device, lwa: LWAClient, tokens: TokenManager<C>, logger: Logger) {
        self.device = device
        self.lwa = lwa
        self.tokens = tokens
        self.logger = logger
    }

    /// Routes one request of the pairing server.
    func handle(_ request: ServerRequest) async -> ServerResponse {
        if await tokens.isPaired { return .error(404, "NOT_FOUND", "the device is already paired") }
        switch (request.method, request.path) {
        case (.GET, "/provision/deviceInfo"): return deviceInfo()
        case (.POST, "/provision/companionInfo"): return await companionInfo(request.body)
        case (_, "/provision/deviceInfo"), (_, "/provision/companionInfo"):
            return .error(405, "INVALID_PARAM", "method not allowed")
        default: return .error(404, "NOT_FOUND", "no such endpoint")
        }
    }

    private struct DeviceInfo: Encodable {
        var serial: String
        var deviceModel: String
        var isTestDevice: Bool
        var shouldIncludeNonLive: Bool
        var codeChallenge: String
        var codeChallengeMethod: String
        var sessionId: String
    }

    func deviceInfo() -> ServerResponse {
        let fresh = Session(id: PKCE.randomSessionID(), pkce: PKCE())
        session = fresh
        logger.info("pairing session started")
        return .json(
            200,
            DeviceInfo(
                serial: device.serial, deviceModel: device.model, isTestDevice: device.phase.isTestDevice,
                shouldIncludeNonLive: device.phase.shouldIncludeNonLive, codeChallenge: fresh.pkce.challenge,
                codeChallengeMethod: fresh.pkce.method, sessionId: fresh.id))
    }

    /// The fields the app sends; each checked for presence, type and length.
    struct CompanionInfo: Equatable {
        var sessionId: String
        var authCode: Secret
        var clientId: String
        var redirectUri: String

        enum Parsed: Equatable {
            case valid(CompanionInfo)
            case invalid(reason: String)
        }

        static func parse(_ body: [UInt8]) -> Parsed {
            guard case .object(let fields)? = try? JSONValue.parse(body) else {
                return .invalid(reason: "the body must be a JSON object")
            }
            func field(_ name: String, limit: Int) throws(Invalid) -> String {
                guard case .string(let text)? = fields[name] else {
                    throw Invalid(reason: "\(name) is missing or not a string")
                }
                guard !text.isEmpty, text.utf8.count <= limit else {
                    throw Invalid(reason: "\(name) must be 1 to \(limit) characters")
                }
                guard text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
                    throw Invalid(reason: "\(name) must be printable ASCII without spaces")
                }
                return text
            }
            do throws(Invalid) {
                return .valid(
                    CompanionInfo(
                        sessionId: try field("sessionId", limit: 128),
                        authCode: Secret(try field("authCode", limit: 2048)),
                        clientId: try field("clientId", limit: 256), redirectUri: try field("redirectUri", limit: 2048))
                )
            } catch {
                return .invalid(reason: error.reason)
            }
        }
    }

    func companionInfo(_ body: [UInt8]) async -> ServerResponse {
        let info: CompanionInfo
        switch CompanionInfo.parse(body) {
        case .invalid(let reason): return .error(400, "INVALID_PARAM", reason)
        case .valid(let parsed): info = parsed
        }
        guard let current = session, current.id == info.sessionId, !redeeming else {
            return .error(400, "INCORRECT_SESSION_ID", "unknown or superseded session; fetch deviceInfo again")
        }
        redeeming = true
        defer { redeeming = false }
        do {
            let grant = try await lwa.redeem(
                code: info.authCode, redirectURI: info.redirectUri, clientId: info.clientId,
                verifier: current.pkce.verifier)
            try await tokens.install(grant, clientId: info.clientId)
        } catch {
            logger.warning("pairing failed", metadata: ["error.code": "\(error.code)", "error": "\(error.message)"])
            switch error.code {
            case .network, .server: return .error(502, "LWA_ERROR", error.message)
            case .storage: return .error(500, "STORAGE_ERROR", error.message)
            default: return .error(400, "LWA_ERROR", error.message)
            }
        }
        if session?.id == current.id { session = nil }
        return .noContent
    }
}

/// Why a companionInfo body was refused.
private struct Invalid: Error {
    var reason: String
}
