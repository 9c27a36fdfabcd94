import Logging
import Synchronization

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

/// The one way the device leaves the customer's account at DRS (`reset`, `deregister`, the owner-change
/// gesture, with or without the daemon). The old pairing's refresh token is first written to
/// `deregistration.json` (0600), kept only for this call; then `DELETE /registration` is tried, and retried with
/// the duties backoff (never sooner than 1 s) until DRS answers. When LWA rotates refresh tokens, the newest
/// one is written to the file before the call that uses its access token, the rule `tokens.json` follows:
/// a failed DELETE is retried with a token LWA still accepts. LWA's `invalid_grant` on the newest token means
/// the pairing is gone already (the customer removed the device); either way the file is then removed.
final actor DeregistrationQueue<C: Clock> where C.Duration == Duration {
    typealias Pending = PendingDeregistration

    static func path(stateDirectory: String) -> String { POSIX.join(stateDirectory, "deregistration.json") }

    private let store: StateStore<Pending>
    private let lwa: LWAClient
    private let drs: DRSClient
    private let clock: C
    private let logger: Logger
    private let waker = Waker()
    private var random = RandomSource.system
    /// When to try: the caller's grace, one try at a time, the backoff.
    private var timeline = DeregistrationTimeline<C.Instant>()
    /// The newest pending call (the file's content, read once); nil when none waits.
    private var pending: Pending?
    private var loaded = false
    /// Why the last try failed, for a `tryNow` that comes inside its backoff.
    private var lastError: AgentError?

    /// `store`: the file's (`StateStore.deregistration`); the commands without the daemon and a reset's wipe
    /// write it through the same store (`saveNow`).
    init(store: StateStore<Pending>, lwa: LWAClient, drs: DRSClient, clock: C, logger: Logger) {
        self.store = store
        self.lwa = lwa
        self.drs = drs
        self.clock = clock
        self.logger = logger
    }

    /// Writes the call durably; nothing is sent yet. The caller (a reset) does its local part and then calls
    /// `tryNow`; if it never does, the queue tries after `callerGrace` on its own. DRS hears nothing before the
    /// local part is done, however long a loaded device takes over it.
    func enqueue(_ next: Pending) async throws(AgentError) {
        try await store.save(next)
        pending = next
        loaded = true
        lastError = nil
        timeline.enqueued(at: clock.now)
        logger.notice("DRS deregistration queued")
        waker.ring()
    }

    /// The caller's local part is done and it will not try itself (the start's reset of a pairing made for
    /// another identity, before the services run): the queue tries as soon as it runs, not after `callerGrace`.
    func leaveToTheQueue() {
        timeline.callerWillNotTry()
        waker.ring()
    }

    /// One try now; after a failure the queue retries on its backoff. Returns the failure, or nil when DRS
    /// answered (or the pairing was gone already). `accessToken`: the old pairing's access token, when it is
    /// still good, saves a refresh.
    func tryNow(accessToken: Secret?) async -> AgentError? {
        switch timeline.callerTry(at: clock.now) {
        case .busy: return AgentError(.network, "an earlier deregistration is being tried now")
        // The queue's own try failed a moment ago: no call before its backoff ends (it retries then).
        case .backingOff: return lastError ?? AgentError(.network, "an earlier deregistration failed")
        case .attempt: return await attempt(accessToken: accessToken)
        }
    }

    /// One try, on the shared rules, and what follows from it: the file removed, or the next try scheduled.
    private func attempt(accessToken: Secret?) async -> AgentError? {
        guard var current = pending else { return nil }
        timeline.started()
        defer { waker.ring() }
        let store = store
        do throws(AgentError) {
            try await Self.attempt(&current, accessToken: accessToken, lwa: lwa, drs: drs, logger: logger) {
                (newest) async throws(AgentError) in try await store.save(newest)
            }
            pending = nil
            lastError = nil
            timeline.succeeded()
            do { try await store.shred() } catch {
                logger.error("could not remove deregistration.json", metadata: ["error": "\(error.message)"])
            }
            return nil
        } catch {
            pending = current
            lastError = error
            let delay = FleetSpread.retryDelay(after: error, attempt: timeline.failures + 1, using: &random)
            timeline.failed(at: clock.now, backoff: delay)
            logger.warning(
                "DRS deregistration failed; will retry",
                metadata: ["error": "\(error.message)", "duty.retryIn": "\(delay.components.seconds)s"])
            return error
        }
    }

    /// One try of the call: `DELETE /registration` with `accessToken`, or with a refreshed one (and once more
    /// after a refresh when DRS rejects the access token given). A rotated refresh token goes into `pending`
    /// and through `keep` (durable) before its access token is used. LWA's `invalid_grant` is success: the
    /// pairing is gone already.
    static func attempt(
        _ pending: inout Pending, accessToken: Secret? = nil, lwa: LWAClient, drs: DRSClient, logger: Logger,
        keep: @escaping @Sendable (Pending) async throws(AgentError) -> Void
    ) async throws(AgentError) {
        let tokens = OldPairingTokens(pending: pending, accessToken: accessToken, lwa: lwa, keep: keep)
        defer { pending = tokens.pending }
        do throws(AgentError) {
            let answer = try await DRSSession(client: drs, tokens: tokens).sendExpectingSuccess(.deregister)
            logger.info("DRS deregistration done", metadata: ["http.status": "\(answer.status)"])
        } catch  where error.code == .applicationNotAuthorized {
            logger.info("DRS deregistration: the pairing is already gone (invalid_grant)")
        }
    }

    func run() async {
        while !Task.isCancelled { await waker.wait(for: await step(), clock: clock) }
    }

    /// Carries out the timeline's actions until it says wait; returns the wait.
    func step() async -> LoopStep<C.Instant> {
        var worked = false
        while !Task.isCancelled {
            if !loaded {
                loaded = true
                // On the disk lane: a corrupt file is moved aside (a rename and a directory fsync).
                let read = try? await store.loadOnLane()
                for problem in read?.problems ?? [] { logger.error("\(problem)") }
                // A call queued while the file was read (`enqueue`) is the newest.
                if pending == nil { pending = read?.value ?? nil }
            }
            switch timeline.next(queued: pending != nil, at: clock.now) {
            case .waitForChange: return .wait(until: nil, worked: worked)
            case .wait(let until): return .wait(until: until, worked: worked)
            case .attempt:
                _ = await attempt(accessToken: nil)
                worked = true
            }
        }
        return .wait(until: nil, worked: worked)
    }
}

/// The old pairing's tokens for its deregistration: the access token it still had (when still good), else one
/// refreshed with the kept refresh token. A rotated refresh token goes into `pending` and through `keep`
/// (durable) before its access token is used, so a failed call is retried with a token LWA still accepts.
final class OldPairingTokens: AccessTokens {
    private let state: Mutex<(pending: PendingDeregistration, accessToken: Secret?)>
    private let lwa: LWAClient
    private let keep: @Sendable (PendingDeregistration) async throws(AgentError) -> Void

    init(
        pending: PendingDeregistration, accessToken: Secret?, lwa: LWAClient,
        keep: @escaping @Sendable (PendingDeregistration) async throws(AgentError) -> Void
    ) {
        state = Mutex((pending, accessToken))
        self.lwa = lwa
        self.keep = keep
    }

    /// The call as it stands: the newest refresh token.
    var pending: PendingDeregistration { state.withLock { $0.pending } }

    func accessToken() async throws(AgentError) -> Secret {
        if let token = state.withLock({ $0.accessToken }) { return token }
        return try await refresh()
    }

    func accessTokenReplacing(_ rejected: Secret) async throws(AgentError) -> Secret {
        state.withLock { $0.accessToken = nil }
        return try await refresh()
    }

    /// A pairing being deregistered accepts no press.
    func pairing() async -> TokenPairing? { nil }

    private func refresh() async throws(AgentError) -> Secret {
        let current = pending
        let grant = try await lwa.refresh(refreshToken: current.refreshToken, clientId: current.clientId)
        if let rotated = grant.refreshToken, rotated != current.refreshToken {
            var next = current
            next.refreshToken = rotated
            try await keep(next)
            state.withLock { $0.pending = next }
        }
        return grant.accessToken
    }
}

extension DeregistrationQueue: LoopingActor {
    /// Over `deregistration.json` of `stateDirectory` (`StateStore.deregistration`).
    init(stateDirectory: String, lwa: LWAClient, drs: DRSClient, clock: C, logger: Logger) {
        self.init(
            store: .deregistration(stateDirectory: stateDirectory), lwa: lwa, drs: drs, clock: clock, logger: logger)
    }
}

extension StateStore<PendingDeregistration> {
    /// `deregistration.json` of the state directory, on the daemon's lane; its one owner is `DeregistrationQueue`
    /// (the commands without the daemon and a reset's wipe write it with `saveNow`).
    static func deregistration(stateDirectory: String) -> Self {
        StateStore(path: DeregistrationQueue<ContinuousClock>.path(stateDirectory: stateDirectory))
    }
}
