import Logging

/// Keeps the device's access token fresh: refreshes on a schedule before expiry, at once when DRS rejects a
/// token, and single-flight (concurrent callers share one refresh). A rotated refresh token is written
/// durably before the new access token is used. `invalid_grant` means the customer removed the device: the
/// tokens are wiped and the agent goes back to pairing mode.
actor TokenManager<C: Clock> where C.Duration == Duration {
    typealias State = TokenState

    private let store: any TokenStore
    private let lwa: LWAClient
    private let clock: C
    private let wallTime: @Sendable () -> Double
    private let logger: Logger
    private let waker = Waker()
    private var random: RandomSource
    private var tokens: TokenSet?
    private var lostReason: String?
    private var inFlight: Task<TokenSet, any Error>?
    private var failures = 0
    /// When to refresh, retry and write again: the schedule and every caller of `accessToken()` share its
    /// one retry gate (callers fail fast with the wait in `retryAfter`).
    private var timeline: RefreshTimeline<C.Instant>
    private var lastFailureCode: AgentError.Code?
    /// The tokens in memory are newer than the file (a write failed: disk full, I/O error). Until a retried
    /// write succeeds they are the device's only copy of the pairing; the superseded refresh token on disk is
    /// never sent again.
    private var unsaved: Bool { timeline.writeRetryAt != nil }
    private var saveFailures = 0
    private var lastLoggedFailure: String?
    /// The last refresh failure, until a refresh succeeds (the retry-wait state).
    private var lastFailure: String?
    /// The pairing's check of the client secret got no answer from LWA: why, until a refresh succeeds.
    private var secretUnchecked: String?
    private var jitter: Double
    /// What the token manager tells the services that follow it; published, never awaited.
    nonisolated let events = Broadcast<TokenEvent>()
    /// The device's identity now (from the config): recorded with every pairing made, and at the first start
    /// with a token file that has none yet (`recordMissingIdentity`). A serial in doubt that reads as the
    /// pairing's again replaces it (`release`).
    private var identity: DeviceIdentity?
    /// Why the pairing orders nothing although it is kept (`hold`): the serial read differs from the pairing's
    /// and may be a glitch. No access token is handed out and no refresh is made (where LWA rotates refresh
    /// tokens, a refresh by a clone would end the original unit's pairing) until `release` or a new pairing.
    private var heldBecause: String?

    init(
        store: any TokenStore, lwa: LWAClient, clock: C, wallTime: @escaping @Sendable () -> Double,
        clockTrusted: Bool = true, random: RandomSource = .system, identity: DeviceIdentity? = nil,
        logger: Logger
    ) throws(AgentError) {
        self.identity = identity
        self.store = store
        self.lwa = lwa
        self.clock = clock
        self.wallTime = wallTime
        self.logger = logger
        self.random = random
        self.jitter = Double.random(in: 0..<1, using: &self.random)
        var tokens = try store.load()
        // With a wall clock that is not set (1970 on a board without a battery clock), a stored expiry says
        // nothing: the access token counts as expired and is refreshed (LWA does not need the device's clock).
        if !clockTrusted { tokens?.accessTokenExpiresAt = 0 }
        self.tokens = tokens
        timeline = RefreshTimeline(fromDisk: tokens != nil)
    }

    var state: State {
        if let tokens {
            if let heldBecause { return .retryWait(expiresAt: tokens.accessTokenExpiresAt, reason: heldBecause) }
            if inFlight != nil { return .refreshing(expiresAt: tokens.accessTokenExpiresAt) }
            if let lastFailure {
                let reason = secretUnchecked.map { "\($0): \(lastFailure)" } ?? lastFailure
                return .retryWait(expiresAt: tokens.accessTokenExpiresAt, reason: reason)
            }
            if let secretUnchecked {
                return .retryWait(expiresAt: tokens.accessTokenExpiresAt, reason: secretUnchecked)
            }
            return .fresh(expiresAt: tokens.accessTokenExpiresAt)
        }
        if let lostReason { return .needsPairing(reason: lostReason) }
        return .unpaired
    }

    var isPaired: Bool { tokens != nil }

    /// Whether `accessToken()` would answer now without a refresh.
    var hasUsableAccessToken: Bool { tokens.map { !isTooClose($0) } ?? false }

    /// The current tokens (for a factory reset's deregistration; never printed).
    var currentTokens: TokenSet? { tokens }

    /// A token file from a build before the identity record (no `identity`) gets the device's identity now,
    /// written at this start, not at the next refresh: an image later cloned from this unit carries it, and the
    /// clone's other serial is then a change (`identityChange`). Returns the identity written, nil when there
    /// was nothing to write. Called once at start, before anything else writes the tokens.
    func recordMissingIdentity() async throws(AgentError) -> DeviceIdentity? {
        guard let identity, var current = tokens, current.identity == nil else { return nil }
        current.identity = identity
        try await store.save(current, isolation: self)
        tokens = current
        return identity
    }

    /// The pairing was made for another identity than the device's now (`identity`): what changed, or nil
    /// when it was not (or the token file predates the record, or nothing is paired). Only an identity that was
    /// read and differs is a change: a serial that cannot be read stops the start before this is asked.
    var identityChange: String? { identity.flatMap { tokens?.identityChange(to: $0) } }

    /// The identity the pairing was made for (nil when unpaired or recorded by no build yet).
    var pairedIdentity: DeviceIdentity? { tokens?.identity }

    /// The pairing orders nothing, and is not refreshed, until `release`: `reason` is what `status` says.
    func hold(reason: String) {
        guard heldBecause != reason else { return }
        heldBecause = reason
        notifyChange()
    }

    /// The serial in doubt reads as the pairing's again (`identity`, its case as read): the pairing is used again,
    /// and a later pairing in this run records this identity, not the one read at the start.
    func release(identity: DeviceIdentity) {
        self.identity = identity
        guard heldBecause != nil else { return }
        heldBecause = nil
        waker.ring()
        notifyChange()
    }

    /// The tag of the current pairing (nil when unpaired, or paired before tags existed).
    var pairingId: String? { tokens?.pairingId }

    /// Stores the tokens from a pairing (`LWAClient.checkedAtPairing`'s result) durably, then starts using them.
    /// When LWA did not answer the check of the client secret (`uncheckedBecause`), the access token counts as
    /// expired, so a refresh (which LWA answers only for the right secret) checks it at once, and again on the
    /// refresh backoff until LWA answers; `status` says so meanwhile.
    func install(_ checked: LWAClient.CheckedGrant, clientId: String) async throws(AgentError) {
        let (grant, secretUncheckedBecause) = (checked.grant, checked.uncheckedBecause)
        guard let refreshToken = grant.refreshToken else {
            throw AgentError(.server, "LWA redeemed the code but sent no refresh token")
        }
        let now = wallTime()
        let tag = (0..<2).map { _ in String(UInt64.random(in: .min ... .max, using: &random), radix: 16) }
        var fresh = TokenSet(
            clientId: clientId, refreshToken: refreshToken, accessToken: grant.accessToken,
            accessTokenExpiresAt: now + grant.expiresIn, accessTokenLifetime: grant.expiresIn,
            pairingId: tag.joined(separator: "-"), identity: identity)
        if secretUncheckedBecause != nil { fresh.accessTokenExpiresAt = now }
        try await store.save(fresh, isolation: self)
        logger.info("paired", metadata: ["token.expiresIn": "\(Int(grant.expiresIn))"])
        pairingChanged(to: fresh, lostReason: nil)
        if let why = secretUncheckedBecause {
            secretUnchecked =
                "lwa.clientSecret is not checked yet: LWA did not answer the pairing's check (\(why)); checking it "
                + "with a refresh"
            logger.warning("paired; lwa.clientSecret not checked yet, checking it now", metadata: ["error": "\(why)"])
        }
    }

    /// Paired (`next`) or forgotten (nil, with the reason): the schedule starts over and every follower hears it.
    private func pairingChanged(to next: TokenSet?, lostReason reason: String?) {
        tokens = next
        heldBecause = nil
        lostReason = reason
        clearRetryState()
        waker.ring()
        notifyChange()
        events.publish(next == nil ? .pairingLost : .paired)
    }

    /// Forgets the pairing (a reset, the owner-change gesture, a pairing made for another identity): wipes the
    /// tokens and goes back to pairing mode; returns the tokens it had at that moment (the newest, after any
    /// rotation), for the deregistration.
    @discardableResult
    func unpair(reason: String) async throws(AgentError) -> TokenSet? {
        // A refresh already out may come back with a rotated refresh token, and LWA may have ended the one held
        // now: wait for it, so that what is returned (the deregistration's token) is one LWA still accepts.
        var awaited: Task<TokenSet, any Error>?
        while let task = inFlight, task != awaited {
            awaited = task
            _ = try? await Self.value(of: task)
        }
        let had = tokens
        try await store.wipe(isolation: self)
        logger.notice("pairing forgotten", metadata: ["token.reason": "\(reason)"])
        pairingChanged(to: nil, lostReason: reason)
        return had
    }

    /// An access token that is not expired, refreshing first when it is (or is about to be).
    func accessToken() async throws(AgentError) -> Secret {
        guard let current = tokens else { throw AgentError(.notPaired, "the device is not paired") }
        // Held: callers wait for the next token event, as when unpaired (`release` publishes one).
        if let heldBecause { throw AgentError(.notPaired, heldBecause) }
        if !isTooClose(current) { return current.accessToken }
        try checkRetryGate()
        return try await refresh(reason: "expiring").accessToken
    }

    /// DRS rejected `rejected`: refresh now, unless another caller already replaced that token.
    func accessTokenReplacing(_ rejected: Secret) async throws(AgentError) -> Secret {
        if let heldBecause { throw AgentError(.notPaired, heldBecause) }
        if let current = tokens, current.accessToken != rejected, !isTooClose(current) {
            return current.accessToken
        }
        try checkRetryGate()
        return try await refresh(reason: "rejected by DRS").accessToken
    }

    private func isTooClose(_ tokens: TokenSet) -> Bool {
        RefreshSchedule.isTooCloseToExpiry(
            now: wallTime(), expiresAt: tokens.accessTokenExpiresAt, lifetime: tokens.accessTokenLifetime)
    }

    /// Fails fast while the refresh backoff runs (unless a refresh is already out, which the caller joins):
    /// the order path and the duties wait for `retryAfter` instead of asking LWA again.
    private func checkRetryGate() throws(AgentError) {
        guard inFlight == nil, tokens != nil, let wait = timeline.retryGate(at: clock.now) else { return }
        throw AgentError(
            lastFailureCode ?? .network, "token refresh is backing off: \(lastFailure ?? "an earlier failure")",
            retryAfter: wait)
    }

    /// Refreshes once; concurrent callers wait for the same refresh.
    @discardableResult
    func refresh(reason: String) async throws(AgentError) -> TokenSet {
        if let inFlight { return try await Self.value(of: inFlight) }
        guard tokens != nil else { throw AgentError(.notPaired, "the device is not paired") }
        if let heldBecause { throw AgentError(.notPaired, heldBecause) }
        let task = Task { try await self.performRefresh(reason: reason) }
        inFlight = task
        notifyChange()
        let result: Result<TokenSet, AgentError>
        do { result = .success(try await Self.value(of: task)) } catch { result = .failure(error) }
        inFlight = nil
        notifyChange()
        return try result.get()
    }

    /// The refresh's result. The refresh runs in a task of its own (callers share it), which a caller's
    /// cancellation does not reach by itself: a cancelled caller (the agent stopping: the schedule and every
    /// service are cancelled) cancels it. The call to LWA inside it then still gets `stopGrace` to be answered
    /// (`finishingWithinTheStopGrace`): where LWA rotates refresh tokens it may have ended the one on disk
    /// already, and only its answer carries the new one. A token write under way returns once the new file is
    /// in place (`FileTokenStore.save`). So a stop stays within its 10 s and keeps a rotation LWA answered.
    private static func value(of task: Task<TokenSet, any Error>) async throws(AgentError) -> TokenSet {
        do {
            return try await withTaskCancellationHandler {
                try await task.value
            } onCancel: {
                task.cancel()
            }
        } catch let error as AgentError { throw error } catch {
            throw AgentError(.network, "refresh interrupted")
        }
    }

    /// How long a refresh already sent to LWA may still take once the agent stops: the stop's 10 s less the
    /// second curl takes to abort and the write of the answer. A refresh of 6 s interrupted 1 s in is answered.
    static var stopGrace: Duration { .seconds(6) }

    /// Runs `call` (a request to LWA) in a task that a cancellation of the caller ends only `stopGrace` later:
    /// LWA's answer to a request that has left may hold the only copy of a rotated refresh token. A call still
    /// unanswered then is aborted; LWA may have rotated the token meanwhile, which the device cannot know, and
    /// the restart tries the token on disk.
    private func finishingWithinTheStopGrace(
        _ call: @escaping @Sendable () async throws(AgentError) -> TokenGrant
    ) async throws(AgentError) -> TokenGrant {
        let inner = Task { () async throws -> TokenGrant in try await call() }
        let clock = clock
        do {
            return try await withTaskCancellationHandler {
                try await inner.value
            } onCancel: {
                Task {
                    try? await clock.sleep(for: Self.stopGrace)
                    inner.cancel()
                }
            }
        } catch let error as AgentError { throw error } catch {
            throw AgentError(.network, "refresh interrupted")
        }
    }

    private func performRefresh(reason: String) async throws(AgentError) -> TokenSet {
        guard let current = tokens else { throw AgentError(.notPaired, "the device is not paired") }
        logger.debug("refreshing access token", metadata: ["token.reason": "\(reason)"])
        // The lifetime counts from when the request left, not from when the answer came: LWA may take up to the
        // request timeout to answer, and the token's clock started when LWA made it.
        let sentAt = wallTime()
        do throws(AgentError) {
            let lwa = lwa
            let grant = try await finishingWithinTheStopGrace { () async throws(AgentError) in
                try await lwa.refresh(refreshToken: current.refreshToken, clientId: current.clientId)
            }
            // The customer may have unpaired or paired again while LWA answered: this grant belongs to a pairing
            // that is gone, and writing it would bring that pairing back.
            guard tokens?.refreshToken == current.refreshToken else {
                throw AgentError(.notPaired, "the pairing changed during the refresh")
            }
            let next = TokenSet(
                clientId: current.clientId, refreshToken: grant.refreshToken ?? current.refreshToken,
                accessToken: grant.accessToken, accessTokenExpiresAt: sentAt + grant.expiresIn,
                accessTokenLifetime: grant.expiresIn, pairingId: current.pairingId,
                identity: current.identity ?? identity)
            // The new refresh token is written before anything uses the new access token. If the write fails,
            // LWA may already have invalidated the old token: the new set is kept in memory (the only copy of
            // the pairing now), the old one is never sent again, and the write is retried on a timer.
            await save(next)
            tokens = next
            failures = 0
            timeline.refreshed(nil, at: clock.now)
            lastFailureCode = nil
            lastLoggedFailure = nil
            lastFailure = nil
            secretUnchecked = nil
            jitter = Double.random(in: 0..<1, using: &random)
            waker.ring()
            logger.info(
                "access token refreshed",
                metadata: [
                    "token.expiresIn": "\(Int(grant.expiresIn))",
                    "token.rotated": "\(grant.refreshToken.map { $0 != current.refreshToken } ?? false)",
                ])
            return next
        } catch  where error.code == .applicationNotAuthorized {
            // Only the pairing LWA refused is wiped, not one the customer made while the request was out.
            guard tokens?.refreshToken == current.refreshToken else { throw error }
            logger.error("LWA no longer accepts the refresh token: the customer removed the device; pairing again")
            do { try await store.wipe(isolation: self) } catch {
                logger.error("could not remove the token file", metadata: ["error": "\(error)"])
            }
            pairingChanged(to: nil, lostReason: "LWA refused the refresh token (invalid_grant)")
            throw error
        } catch  where error.code == .notPaired {
            throw error
        } catch {
            failures += 1
            lastFailure = error.message
            lastFailureCode = error.code
            let backoff = error.code == .unauthorizedClient ? Backoff.configurationFault : Backoff.tokenRefresh
            var delay = backoff.delay(attempt: failures, using: &random)
            // LWA's own Retry-After (429, 503) is honoured: never sooner than it asked.
            if let asked = error.retryAfter { delay = max(delay, asked) }
            timeline.refreshFailed(at: clock.now, backoff: delay)
            waker.ring()
            if lastLoggedFailure != error.message || error.code != .unauthorizedClient {
                logger.warning(
                    "token refresh failed",
                    metadata: [
                        "error.code": "\(error.code)", "error": "\(error.message)", "attempt": "\(failures)",
                        "token.retryIn": "\(delay.components.seconds)s",
                    ])
                lastLoggedFailure = error.message
            }
            throw AgentError(error.code, error.message, retryAfter: delay)
        }
    }

    private func clearRetryState() {
        failures = 0
        lastFailure = nil
        secretUnchecked = nil
        lastFailureCode = nil
        timeline.pairingChanged()
        saveFailures = 0
    }

    /// Writes `next`; on failure keeps it as unsaved and plans another write (5 s doubling to 5 minutes).
    private func save(_ next: TokenSet) async {
        do {
            try await store.save(next, isolation: self)
            if unsaved { logger.notice("the refreshed tokens are written now") }
            timeline.written(failedRetryingIn: nil, at: clock.now)
            saveFailures = 0
        } catch {
            saveFailures += 1
            let delay = Backoff.stateWrite.delay(attempt: saveFailures, using: &random)
            timeline.written(failedRetryingIn: delay, at: clock.now)
            logger.error(
                "could not write the tokens; keeping them in memory and trying again",
                metadata: [
                    "error": "\(error.message)", "attempt": "\(saveFailures)",
                    "token.retryIn": "\(delay.components.seconds)s",
                ])
        }
    }

    /// The wall clock was just set: a refresh that is backing off (TLS fails while the clock says 1970) is
    /// tried again now.
    func retryNow() {
        timeline.clockSet(at: clock.now)
        waker.ring()
    }

    private func notifyChange() {
        events.publish(.changed(state))
    }

    /// The schedule: carries out `RefreshTimeline`'s actions (refresh, back off, write again, wait) until
    /// cancelled; a change (pairing, refresh, failure) ends a wait early.
    func run() async {
        while !Task.isCancelled { await waker.wait(for: await step(), clock: clock) }
    }

    /// Carries out the timeline's actions until it says wait; returns the wait.
    func step() async -> LoopStep<C.Instant> {
        var worked = false
        while !Task.isCancelled {
            // Held: no refresh until `release` (which rings) or a new pairing.
            if heldBecause != nil { return .wait(until: nil, worked: worked) }
            let facts = tokens.map { current in
                RefreshTimeline<C.Instant>.Facts(
                    paired: true,
                    secondsUntilRefresh: RefreshSchedule.secondsUntilRefresh(
                        now: wallTime(), expiresAt: current.accessTokenExpiresAt,
                        lifetime: current.accessTokenLifetime, jitter: jitter),
                    lifetime: current.accessTokenLifetime)
            }
            switch timeline.next(facts ?? .init(paired: false, secondsUntilRefresh: 0, lifetime: 0), at: clock.now) {
            case .waitForPairing:
                return .wait(until: nil, worked: worked)
            case .startupDelay(let window):
                timeline.startupWait(
                    until: clock.now.advanced(by: FleetSpread.startupDelay(window: window, using: &random)))
            case .retryWrite:
                if let tokens { await save(tokens) }
                worked = true
            case .refresh(let reason):
                // A failure set the retry gate (or wiped the pairing): the next action waits for it.
                if (try? await refresh(reason: reason.rawValue)) != nil {
                    timeline.refreshed(reason, at: clock.now)
                }
                worked = true
            case .wait(let until):
                return .wait(until: until, worked: worked)
            }
        }
        return .wait(until: nil, worked: worked)
    }
}

extension TokenManager: LoopingActor {}
