import Logging

/// What `deregistration.json` holds: the old pairing's refresh token and client id, for one call.
struct PendingDeregistration: Codable, Sendable, StateFormat {
    static let formatVersion = 1
    var version = formatVersion
    var refreshToken: Secret
    var clientId: String

    init(refreshToken: Secret, clientId: String) {
        self.refreshToken = refreshToken
        self.clientId = clientId
    }
}

/// A DRS deregistration that could not be made when the owner reset the device (offline, or the daemon was
/// not running): the old pairing's refresh token, kept in `deregistration.json` (0600) only for this one call,
/// is refreshed and `DELETE /registration` sent, retried with the duties backoff until DRS answers. LWA's
/// `invalid_grant` means the pairing is gone already; either way the file is then removed.
actor DeregistrationQueue<C: Clock> where C.Duration == Duration {
    typealias Pending = PendingDeregistration

    static func path(stateDirectory: String) -> String { POSIX.join(stateDirectory, "deregistration.json") }

    static func write(_ pending: Pending, stateDirectory: String) throws(AgentError) {
        try StateFile.save(pending, to: path(stateDirectory: stateDirectory))
    }

    private let stateDirectory: String
    private let lwa: LWAClient
    private let drs: DRSClient
    private let clock: C
    private let logger: Logger
    private let waker = Waker()
    private var random = RandomSource.system
    private var failures = 0

    init(stateDirectory: String, lwa: LWAClient, drs: DRSClient, clock: C, logger: Logger) {
        self.stateDirectory = stateDirectory
        self.lwa = lwa
        self.drs = drs
        self.clock = clock
        self.logger = logger
    }

    func queue(refreshToken: Secret, clientId: String) throws(AgentError) {
        try Self.write(.init(refreshToken: refreshToken, clientId: clientId), stateDirectory: stateDirectory)
        failures = 0
        logger.notice("DRS deregistration queued")
        waker.ring()
    }

    /// One try: refresh the old pairing's token and send `DELETE /registration`. LWA's `invalid_grant` means the
    /// pairing is gone already, which is success too.
    static func attempt(_ pending: Pending, lwa: LWAClient, drs: DRSClient, logger: Logger) async throws(AgentError) {
        do throws(AgentError) {
            let grant = try await lwa.refresh(refreshToken: pending.refreshToken, clientId: pending.clientId)
            let answer = try await drs.deregister(token: grant.accessToken)
            guard (200..<300).contains(answer.status) else {
                throw AgentError(.server, "DRS answered \(answer.status)")
            }
            logger.info("DRS deregistration done", metadata: ["http.status": "\(answer.status)"])
        } catch  where error.code == .applicationNotAuthorized {
            logger.info("DRS deregistration: the pairing is already gone (invalid_grant)")
        }
    }

    func run() async {
        let path = Self.path(stateDirectory: stateDirectory)
        while !Task.isCancelled {
            let pending = try? StateFile.load(Pending.self, from: path) { logger.error("\($0)") }
            guard let pending else {
                await waker.wait(timeout: nil, clock: clock)
                continue
            }
            do throws(AgentError) {
                try await Self.attempt(pending, lwa: lwa, drs: drs, logger: logger)
                try? POSIX.shred(path)
            } catch {
                failures += 1
                let delay = DutySchedule.retryDelay(after: error, attempt: failures, using: &random)
                logger.warning(
                    "queued DRS deregistration failed; will retry",
                    metadata: ["error": "\(error.message)", "duty.retryIn": "\(delay.components.seconds)s"])
                await waker.wait(timeout: delay, clock: clock)
            }
        }
    }
}
