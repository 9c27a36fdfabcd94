import Logging
import NIOHTTP1

/// The device's side of pairing with the companion app (docs/companion-app.md). Each `deviceInfo` starts a
/// new session with a fresh PKCE pair (the newest session is always valid; each peer address has one, see
/// `PairingSessions` for the rate limits); `companionInfo` redeems the app's authorization code with that
/// session's verifier and answers 204 only once the tokens are durable. Every request first passes
/// `PairingRequestGuard` (Host, Origin, Content-Type).
///
/// With a setup key (`pairing.setupKeyFile`) both sides prove they know it (`SetupKey`): `deviceInfo` needs a
/// `nonce` and answers a `proof` of it and the session; `companionInfo` needs the app's `proof`, checked before
/// anything goes to LWA (a wrong one answers 403 `INCORRECT_PROOF`, the code is not redeemed and the session
/// stays valid). Wrong proofs are limited per address and per session, and logged as counts (`WrongProofs`).
final actor PairingCoordinator<C: Clock> where C.Duration == Duration {
    private let device: AgentConfig.Device
    private let setupKey: SetupKey?
    private let clientId: String
    private let lwa: LWAClient
    private let tokens: TokenManager<C>
    private let clock: C
    private let logger: Logger
    private var sessions: PairingSessions<C.Instant, PKCE>
    private var wrongProofs: WrongProofs<C.Instant>
    private var redeeming = false
    /// The names a request's Host may give (`PairingRequestGuard.deviceNames`), re-read after a miss at
    /// most every 5 s (an address from DHCP may come later than the agent).
    private let readDeviceNames: @Sendable () -> Set<String>
    private var deviceNames: Set<String>?
    private var deviceNamesReadAt: C.Instant?
    /// The bound port (a Host may name it, or no port).
    var port: Int?

    init(
        device: AgentConfig.Device, setupKey: SetupKey? = nil, clientId: String, lwa: LWAClient,
        tokens: TokenManager<C>, clock: C, limits: PairingSessions<C.Instant, PKCE>.Limits = .init(),
        proofLimits: WrongProofs<C.Instant>.Limits = .init(), deviceNames: @escaping @Sendable () -> Set<String>,
        logger: Logger
    ) {
        self.device = device
        self.setupKey = setupKey
        self.clientId = clientId
        self.lwa = lwa
        self.tokens = tokens
        self.clock = clock
        self.sessions = PairingSessions(limits: limits)
        self.wrongProofs = WrongProofs(limits: proofLimits)
        self.readDeviceNames = deviceNames
        self.logger = logger
    }

    /// A new window: sessions of an earlier one are no longer valid.
    func windowOpened(port: Int?) {
        self.port = port
        sessions.removeAll()
        wrongProofs.removeSessions()
        deviceNames = nil
    }

    /// Routes one request of the pairing server.
    func handle(_ request: ServerRequest) async -> ServerResponse {
        log(wrongProofs.due(at: clock.now))
        if let refusal = PairingRequestGuard.refusal(request, deviceNames: names(), port: port) {
            // A name that is not (yet) known may be an address that came after the last look.
            let now = clock.now
            guard refusal.status == 421, PairingRequestGuard.mayReadNamesAgain(lastReadAt: deviceNamesReadAt, now: now),
                PairingRequestGuard.refusal(request, deviceNames: names(reread: true), port: port) == nil
            else { return refusal }
        }
        if await tokens.isPaired { return .error(404, "NOT_FOUND", "the device is already paired") }
        switch (request.method, request.path) {
        case (.GET, "/provision/deviceInfo"): return deviceInfo(peer: request.peer ?? "", query: request.query)
        case (.POST, "/provision/companionInfo"): return await companionInfo(request.body, peer: request.peer ?? "")
        case (_, "/provision/deviceInfo"), (_, "/provision/companionInfo"):
            return .error(405, "INVALID_PARAM", "method not allowed")
        default: return .error(404, "NOT_FOUND", "no such endpoint")
        }
    }

    private func names(reread: Bool = false) -> Set<String> {
        if reread || deviceNames == nil {
            deviceNames = readDeviceNames()
            deviceNamesReadAt = clock.now
        }
        return deviceNames ?? []
    }

    private struct DeviceInfo: Encodable {
        var serial: String
        var deviceModel: String
        var isTestDevice: Bool
        var shouldIncludeNonLive: Bool
        var codeChallenge: String
        var codeChallengeMethod: String
        var sessionId: String
        /// With a setup key: HMAC of the nonce and this answer's fields (`SetupKey.deviceInfoMessage`).
        var proof: String?
    }

    /// The `nonce` parameter of a query (`nonce=…`, first one), or nil.
    static func nonce(inQuery query: String?) -> String? {
        guard let query else { return nil }
        for pair in query.split(separator: "&") where pair.hasPrefix("nonce=") {
            return String(pair.dropFirst("nonce=".count))
        }
        return nil
    }

    func deviceInfo(peer: String, query: String? = nil) -> ServerResponse {
        var nonce: String?
        if setupKey != nil {
            guard let given = Self.nonce(inQuery: query), SetupKey.isNonce(given) else {
                return .error(
                    400, "INVALID_PARAM",
                    "this device has a setup key: send ?nonce= with 32 hex digits, and check the answer's proof")
            }
            nonce = given
        }
        let now = clock.now
        if let wait = sessions.mayStart(peer: peer, at: now) {
            return .tooManyRequests("pairing sessions from this address", retryAfter: wait)
        }
        let pkce = PKCE()
        let id = PKCE.randomSessionID()
        sessions.start(id: id, peer: peer, value: pkce, at: now)
        logger.info("pairing session started", metadata: ["pairing.peer": "\(peer)"])
        let proof = nonce.flatMap { nonce in
            setupKey?.proof(
                of: SetupKey.deviceInfoMessage(
                    nonce: nonce, sessionId: id, codeChallenge: pkce.challenge, codeChallengeMethod: pkce.method,
                    serial: device.serial, deviceModel: device.model, isTestDevice: device.phase.isTestDevice,
                    shouldIncludeNonLive: device.phase.shouldIncludeNonLive))
        }
        return .json(
            200,
            DeviceInfo(
                serial: device.serial, deviceModel: device.model, isTestDevice: device.phase.isTestDevice,
                shouldIncludeNonLive: device.phase.shouldIncludeNonLive, codeChallenge: pkce.challenge,
                codeChallengeMethod: pkce.method, sessionId: id, proof: proof))
    }

    /// The fields the app sends; each checked for presence, type and length.
    struct CompanionInfo {
        var sessionId: String
        var authCode: Secret
        var clientId: String
        var redirectUri: String
        /// The app's proof (`SetupKey.companionInfoMessage`); nil when not sent.
        var proof: String? = nil

        enum Parsed {
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
                // A proof of another type or size is a wrong proof (403), not a malformed request: it is
                // checked only where a setup key is configured.
                var proof: String?
                if case .string(let text)? = fields["proof"], text.utf8.count <= 128 { proof = text }
                return .valid(
                    CompanionInfo(
                        sessionId: try field("sessionId", limit: 128),
                        authCode: Secret(try field("authCode", limit: 2048)),
                        clientId: try field("clientId", limit: 256), redirectUri: try field("redirectUri", limit: 2048),
                        proof: proof)
                )
            } catch {
                return .invalid(reason: error.reason)
            }
        }
    }

    func companionInfo(_ body: [UInt8], peer: String = "") async -> ServerResponse {
        let info: CompanionInfo
        switch CompanionInfo.parse(body) {
        case .invalid(let reason): return .error(400, "INVALID_PARAM", reason)
        case .valid(let parsed): info = parsed
        }
        guard info.clientId == clientId else {
            return .error(400, "INVALID_PARAM", "clientId is not this device's LWA client id (lwa.clientId)")
        }
        guard let current = sessions.session(id: info.sessionId), !redeeming else {
            return .error(400, "INCORRECT_SESSION_ID", "unknown or superseded session; fetch deviceInfo again")
        }
        // Before anything reaches LWA: a code from a companion that did not read the label is never redeemed
        // (an attacker's code is not, and a customer's code sent to a wrong proof is not burned).
        if let setupKey {
            let now = clock.now
            if let wait = wrongProofs.wait(peer: peer, session: current.id, owner: current.peer, at: now) {
                log(wrongProofs.throttled(peer: peer, at: now))
                return .tooManyRequests("wrong proofs", retryAfter: wait)
            }
            let message = SetupKey.companionInfoMessage(
                sessionId: info.sessionId, authCode: info.authCode.value, clientId: info.clientId,
                redirectUri: info.redirectUri)
            guard let proof = info.proof, setupKey.accepts(proof, of: message) else {
                log(wrongProofs.wrong(peer: peer, session: current.id, owner: current.peer, at: now))
                return .error(
                    403, "INCORRECT_PROOF",
                    "the proof is missing or wrong: compute it with the setup key on the device's label")
            }
        }
        redeeming = true
        defer { redeeming = false }
        do {
            let redeemed = try await lwa.redeem(
                code: info.authCode, redirectURI: info.redirectUri, clientId: info.clientId,
                verifier: current.value.verifier)
            let checked = try await lwa.checkedAtPairing(redeemed, clientId: info.clientId)
            try await tokens.install(checked, clientId: info.clientId)
        } catch {
            logger.warning("pairing failed", metadata: ["error.code": "\(error.code)", "error": "\(error.message)"])
            switch error.code {
            case .network, .server: return .error(502, "LWA_ERROR", error.message)
            case .storage: return .error(500, "STORAGE_ERROR", error.message)
            default: return .error(400, "LWA_ERROR", error.message)
            }
        }
        sessions.removeAll()
        wrongProofs.removeSessions()
        log(wrongProofs.due(at: clock.now, force: true))
        return .noContent
    }

    /// One line for a count of wrong proofs (`WrongProofs.Report`), never one per request; never the proof.
    private func log(_ report: WrongProofs<C.Instant>.Report?) {
        guard let report else { return }
        let seconds = PairingWindowKeeper<C>.seconds(report.since.duration(to: clock.now))
        logger.warning(
            "pairing refused: companionInfo without the setup key's proof",
            metadata: [
                "pairing.wrongProofs": "\(report.wrongProofs)", "pairing.throttled": "\(report.throttled)",
                "pairing.peers": "\(report.peers)", "pairing.peer": "\(report.busiestPeer)",
                "pairing.seconds": "\(Int(seconds.rounded()))",
            ])
    }
}

/// Why a companionInfo body was refused.
private struct Invalid: Error {
    var reason: String
}
