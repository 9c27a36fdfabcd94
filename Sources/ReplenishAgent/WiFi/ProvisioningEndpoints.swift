import Logging

/// The setup endpoints the phone calls on the access point (docs/wifi-setup.md, "The provisioning requests"):
/// `GET /provision/networks`, `POST /provision/network` and `GET /provision/network`, each under a proof keyed by
/// the setup key (`SetupAccessPoint`'s texts). A missing or wrong proof answers `403 INCORRECT_PROOF` and changes
/// nothing; wrong proofs are limited per address (`WrongProofs`). Served only while setup mode is open: `nil`
/// for any other path, `404` while setup is closed.
final actor ProvisioningEndpoints<C: Clock> where C.Duration == Duration {
    private let key: SetupKey
    private let setup: NetworkSetupKeeper<C>
    private let clock: C
    private let logger: Logger
    private var sessions: PairingSessions<C.Instant, Void>
    private var wrongProofs: WrongProofs<C.Instant>

    init(
        key: SetupKey, setup: NetworkSetupKeeper<C>, clock: C,
        limits: PairingSessions<C.Instant, Void>.Limits = .init(),
        proofLimits: WrongProofs<C.Instant>.Limits = .init(), logger: Logger
    ) {
        self.key = key
        self.setup = setup
        self.clock = clock
        self.logger = logger
        sessions = PairingSessions(limits: limits)
        wrongProofs = WrongProofs(limits: proofLimits)
    }

    /// The answer to `request`, or nil when its path is not a setup endpoint.
    func handle(_ request: ServerRequest) async -> ServerResponse? {
        let path = request.path
        guard path == "/provision/networks" || path == "/provision/network" else { return nil }
        guard await setup.isOpen else { return .error(404, "NOT_FOUND", "setup mode is not open") }
        let peer = request.peer ?? ""
        let query = Query(request.query)
        switch (request.method, path) {
        case (.GET, "/provision/networks"): return await networks(query, peer: peer)
        case (.POST, "/provision/network"): return await join(request.body, peer: peer)
        case (.GET, "/provision/network"): return await state(query, peer: peer)
        default: return .error(405, "INVALID_PARAM", "method not allowed")
        }
    }

    private func networks(_ query: Query, peer: String) async -> ServerResponse {
        guard let nonce = query["nonce"], SetupKey.isNonce(nonce) else {
            return .error(400, "INVALID_PARAM", "send ?nonce= with 32 hex digits and &proof=")
        }
        if let refusal = checkProof(query["proof"], SetupAccessPoint.networksRequestMessage(nonce: nonce), peer: peer) {
            return refusal
        }
        let now = clock.now
        if let wait = sessions.mayStart(peer: peer, at: now) {
            return .tooManyRequests("setup sessions from this address", retryAfter: wait)
        }
        let list: [VisibleNetwork]
        do { list = try await setup.networks() } catch {
            return .error(503, "SCAN_FAILED", "NetworkManager could not list the networks: \(error)")
        }
        let sessionId = PKCE.randomSessionID()
        sessions.start(id: sessionId, peer: peer, value: (), at: now)
        let proof = key.proof(
            of: SetupAccessPoint.networksAnswerMessage(nonce: nonce, sessionId: sessionId, networks: list))
        return .json(
            200,
            NetworksAnswer(
                sessionId: sessionId,
                networks: list.map { .init(ssid: $0.ssid, signal: $0.signal, security: $0.security.rawValue) },
                proof: proof))
    }

    private func join(_ body: [UInt8], peer: String) async -> ServerResponse {
        guard case .object(let fields)? = try? JSONValue.parse(body) else {
            return .error(400, "INVALID_PARAM", "the body must be a JSON object")
        }
        guard case .string(let sessionId)? = fields["sessionId"], case .string(let ssid)? = fields["ssid"] else {
            return .error(400, "INVALID_PARAM", "sessionId and ssid are required strings")
        }
        var passphrase: String?
        switch fields["passphrase"] {
        case nil, .null?: passphrase = nil
        case .string(let text)?: passphrase = text
        default: return .error(400, "INVALID_PARAM", "passphrase must be a string")
        }
        var hidden = false
        switch fields["hidden"] {
        case nil: hidden = false
        case .bool(let flag)?: hidden = flag
        default: return .error(400, "INVALID_PARAM", "hidden must be true or false")
        }
        if let problem = Self.problem(ssid: ssid, passphrase: passphrase) {
            return .error(400, "INVALID_PARAM", problem)
        }
        guard sessions.session(id: sessionId) != nil else {
            return .error(400, "INCORRECT_SESSION_ID", "unknown or superseded session; list the networks again")
        }
        var proof: String?
        if case .string(let text)? = fields["proof"] { proof = text }
        let message = SetupAccessPoint.networkRequestMessage(
            sessionId: sessionId, ssid: ssid, passphrase: passphrase, hidden: hidden)
        if let refusal = checkProof(proof, message, peer: peer) { return refusal }
        if let refused = await setup.join(ssid: ssid, passphrase: passphrase, hidden: hidden) {
            return .error(409, "NOT_NOW", refused)
        }
        return .json(202, ["state": "joining"])
    }

    private func state(_ query: Query, peer: String) async -> ServerResponse {
        guard let sessionId = query["sessionId"], let nonce = query["nonce"], SetupKey.isNonce(nonce) else {
            return .error(400, "INVALID_PARAM", "send ?sessionId=, &nonce= with 32 hex digits and &proof=")
        }
        guard sessions.session(id: sessionId) != nil else {
            return .error(400, "INCORRECT_SESSION_ID", "unknown or superseded session; list the networks again")
        }
        let message = SetupAccessPoint.stateRequestMessage(sessionId: sessionId, nonce: nonce)
        if let refusal = checkProof(query["proof"], message, peer: peer) { return refusal }
        let join = await setup.readJoin()
        let (state, ssid): (String, String) =
            switch join {
            case .joining(let ssid, _)?: ("joining", ssid)
            case .joined(let ssid, _)?: ("joined", ssid)
            case .failed(let ssid, let reason)?: ("failed:\(reason.rawValue)", ssid)
            case nil: ("idle", "")
            }
        let proof = key.proof(
            of: SetupAccessPoint.stateAnswerMessage(sessionId: sessionId, nonce: nonce, state: state, ssid: ssid))
        return .json(200, ["state": state, "ssid": ssid, "proof": proof])
    }

    /// Nil when `proof` proves `message`; else the 403 (or the 429 once the address sent too many wrong ones).
    private func checkProof(_ proof: String?, _ message: String, peer: String) -> ServerResponse? {
        let now = clock.now
        if let wait = wrongProofs.wait(peer: peer, session: "", owner: peer, at: now) {
            _ = wrongProofs.throttled(peer: peer, at: now)
            return .tooManyRequests("wrong proofs from this address", retryAfter: wait)
        }
        guard let proof, key.accepts(proof, of: message) else {
            if let report = wrongProofs.wrong(peer: peer, session: "", owner: peer, at: now) {
                logger.warning(
                    "setup mode: wrong proofs",
                    metadata: ["wifi.wrongProofs": "\(report.wrongProofs)", "wifi.peer": "\(peer)"])
            }
            return .error(403, "INCORRECT_PROOF", "the proof does not match this device's setup key")
        }
        return nil
    }

    /// Why an SSID or passphrase cannot be a network's, or nil: an SSID is 1-32 bytes; a WPA passphrase 8-63
    /// printable ASCII characters (or 64 hex digits, a raw key).
    static func problem(ssid: String, passphrase: String?) -> String? {
        guard (1...32).contains(ssid.utf8.count) else { return "ssid must be 1 to 32 bytes" }
        guard let passphrase else { return nil }
        let printable = passphrase.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value < 0x7F }
        let rawKey =
            passphrase.utf8.count == 64 && passphrase.unicodeScalars.allSatisfy { $0.properties.isASCIIHexDigit }
        guard rawKey || (printable && (8...63).contains(passphrase.utf8.count)) else {
            return "passphrase must be 8 to 63 printable ASCII characters, or 64 hex digits"
        }
        return nil
    }

    struct NetworksAnswer: Encodable {
        struct Network: Encodable {
            var ssid: String
            var signal: Int
            var security: String
        }
        var sessionId: String
        var networks: [Network]
        var proof: String
    }

    /// A query's `name=value` pairs (values as sent: the phone sends hex digits and base64url).
    struct Query {
        private var pairs: [String: String] = [:]
        init(_ query: String?) {
            for pair in (query ?? "").split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                if parts.count == 2, pairs[String(parts[0])] == nil { pairs[String(parts[0])] = String(parts[1]) }
            }
        }
        subscript(name: String) -> String? { pairs[name] }
    }
}
