import Logging

/// Keeps the device's access token fresh: refreshes on a schedule before expiry, at once when DRS rejects a
/// token, and single-flight (concurrent callers share one refresh). A rotated refresh token is written
/// durably before the new access token is used. `invalid_grant` means the customer removed the device: the
/// tokens are wiped and the agent goes back to pairing mode.
final actor TokenManager<C: Clock> where C.Duration == Duration {
    typealias State = TokenState

    private let store: any TokenStore
    private let lwa: LWAClient
    private let logger: Logger
    /// What the token manager tells the services that follow it; published, never awaited.
    nonisolated let events = Broadcast<TokenEvent>()
    /// The clock, the waker, the wall clock and the one random source.
    var time: TokenTime<C>
    /// The tokens, or why there are none.
    private(set) var held: HeldTokens
    /// The refresh's timeline, the refresh out, the secret's check.
    var refreshing: RefreshState<C.Instant>
    /// The device's identity, and the pairing's hold while its serial is in doubt.
    var serialHold: SerialHold

    init(
        store: any TokenStore, lwa: LWAClient, clock: C, wallTime: @escaping @Sendable () -> Double,
        clockTrusted: Bool = true, random: RandomSource = .system, identity: DeviceIdentity? = nil,
        logger: Logger, loadingOn lane: borrowing DiskLane.Context
    ) throws(AgentError) {
        serialHold = SerialHold(identity: identity)
        self.store = store
        self.lwa = lwa
        self.logger = logger
        var time = TokenTime(clock: clock, wallTime: wallTime, random: random)
        var tokens = try store.load(on: lane)
        // With a wall clock that is not set (1970 on a board without a battery clock), a stored expiry says
        // nothing: the access token counts as expired and is refreshed (LWA does not need the device's clock).
        if !clockTrusted { tokens?.accessTokenExpiresAt = 0 }
        held = tokens.map { .paired($0) } ?? .unpaired(lostReason: nil)
        refreshing = RefreshState(timeline: RefreshTimeline(fromDisk: tokens != nil, using: &time.random))
        self.time = time
    }

    /// The tokens held (nil: unpaired).
    var tokens: TokenSet? { held.tokens }

    var state: State {
        TokenState(
            expiresAt: tokens?.accessTokenExpiresAt, heldBecause: serialHold.reason,
            refreshing: refreshing.inFlight != nil,
            lastFailure: refreshing.timeline.failure?.message, secretUnchecked: refreshing.secretUnchecked,
            lostReason: held.lostReason)
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
        guard let identity = serialHold.identity, var current = tokens, current.identity == nil else { return nil }
        current.identity = identity
        try await store.save(current, isolation: self)
        held = .paired(current)
        return identity
    }

    /// The tag of the current pairing (nil when unpaired, or paired before tags existed).
    var pairingId: String? { tokens?.pairingId }

    func pairing() -> TokenPairing? {
        tokens.map { TokenPairing(pairingId: $0.pairingId, hasUsableAccessToken: !isTooClose($0)) }
    }

    /// Stores the tokens from a pairing (`LWAClient.checkedAtPairing`'s result) durably, then starts using them.
    /// When LWA did not answer the check of the client secret (`uncheckedBecause`), the access token counts as
    /// expired, so a refresh (which LWA answers only for the right secret) checks it at once, and again on the
    /// refresh backoff until LWA answers; `status` says so meanwhile.
    func install(_ checked: LWAClient.CheckedGrant, clientId: String) async throws(AgentError) {
        let (grant, secretUncheckedBecause) = (checked.grant, checked.uncheckedBecause)
        guard let refreshToken = grant.refreshToken else {
            throw AgentError(.server, "LWA redeemed the code but sent no refresh token")
        }
        let now = time.wallTime()
        var fresh = TokenSet(
            clientId: clientId, refreshToken: refreshToken, accessToken: grant.accessToken,
            accessTokenExpiresAt: now + grant.expiresIn, accessTokenLifetime: grant.expiresIn,
            pairingId: time.pairingTag(), identity: serialHold.identity)
        if secretUncheckedBecause != nil { fresh.accessTokenExpiresAt = now }
        try await store.save(fresh, isolation: self)
        logger.info("paired", metadata: ["token.expiresIn": "\(Int(grant.expiresIn))"])
        pairingChanged(to: fresh, lostReason: nil)
        if let why = secretUncheckedBecause {
            refreshing.secretUnchecked =
                "lwa.clientSecret is not checked yet: LWA did not answer the pairing's check (\(why)); checking it "
                + "with a refresh"
            logger.warning("paired; lwa.clientSecret not checked yet, checking it now", metadata: ["error": "\(why)"])
        }
    }

    /// Paired (`next`) or forgotten (nil, with the reason): the schedule starts over and every follower hears it.
    /// Why the pairing is lost when LWA refuses the refresh token. The device cannot tell the causes apart: the
    /// customer removed the device, it was deregistered elsewhere, or a refresh that a stop cut off (past its 6 s
    /// grace), a SIGKILL or a power cut was answered with a rotated token that never reached the flash.
    static var refusedRefreshReason: String {
        "LWA refused the refresh token (invalid_grant): the device was removed from the customer's account, or a refresh cut off by a stop or power cut was answered with a new token that never reached the flash"
    }

    private func pairingChanged(to next: TokenSet?, lostReason reason: String?) {
        held = next.map { .paired($0) } ?? .unpaired(lostReason: reason)
        serialHold.pairingChanged()
        refreshing.pairingChanged()
        time.waker.ring()
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
        while let task = refreshing.inFlight, task != awaited {
            awaited = task
            _ = try? await RefreshTask.value(of: task)
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
        if let refusal = serialHold.refusal { throw refusal }
        if !isTooClose(current) { return current.accessToken }
        try checkRetryGate()
        return try await refresh(reason: "expiring").accessToken
    }

    /// DRS rejected `rejected`: refresh now, unless another caller already replaced that token.
    func accessTokenReplacing(_ rejected: Secret) async throws(AgentError) -> Secret {
        if let refusal = serialHold.refusal { throw refusal }
        if let current = tokens, current.accessToken != rejected, !isTooClose(current) {
            return current.accessToken
        }
        try checkRetryGate()
        return try await refresh(reason: "rejected by DRS").accessToken
    }

    private func isTooClose(_ tokens: TokenSet) -> Bool {
        RefreshSchedule.isTooCloseToExpiry(
            now: time.wallTime(), expiresAt: tokens.accessTokenExpiresAt, lifetime: tokens.accessTokenLifetime)
    }

    /// Fails fast while the refresh backoff runs (unless a refresh is already out, which the caller joins):
    /// the order path and the duties wait for `retryAfter` instead of asking LWA again.
    private func checkRetryGate() throws(AgentError) {
        guard refreshing.inFlight == nil, tokens != nil, let wait = refreshing.timeline.retryGate(at: time.clock.now)
        else { return }
        let failure = refreshing.timeline.failure
        throw AgentError(
            failure?.code ?? .network, "token refresh is backing off: \(failure?.message ?? "an earlier failure")",
            retryAfter: wait)
    }

    /// Refreshes once; concurrent callers wait for the same refresh.
    @discardableResult
    func refresh(reason: String, scheduled: RefreshTimeline<C.Instant>.Reason? = nil) async throws(AgentError)
        -> TokenSet
    {
        if let inFlight = refreshing.inFlight { return try await RefreshTask.value(of: inFlight) }
        guard tokens != nil else { throw AgentError(.notPaired, "the device is not paired") }
        if let refusal = serialHold.refusal { throw refusal }
        let task = Task { try await self.performRefresh(reason: reason, scheduled: scheduled) }
        refreshing.inFlight = task
        notifyChange()
        let result: Result<TokenSet, AgentError>
        do { result = .success(try await RefreshTask.value(of: task)) } catch { result = .failure(error) }
        refreshing.inFlight = nil
        notifyChange()
        return try result.get()
    }

    /// `scheduled`: the schedule's reason when the schedule asked (`step`), nil for a caller's refresh.
    private func performRefresh(reason: String, scheduled: RefreshTimeline<C.Instant>.Reason?)
        async throws(AgentError) -> TokenSet
    {
        guard let current = tokens else { throw AgentError(.notPaired, "the device is not paired") }
        logger.debug("refreshing access token", metadata: ["token.reason": "\(reason)"])
        // The lifetime counts from when the request left, not from when the answer came: LWA may take up to the
        // request timeout to answer, and the token's clock started when LWA made it.
        let sentAt = time.wallTime()
        do throws(AgentError) {
            let lwa = lwa
            let grant = try await RefreshTask.finishingWithinTheStopGrace(clock: time.clock) {
                () async throws(AgentError) in
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
                identity: current.identity ?? serialHold.identity)
            // The new refresh token is written before anything uses the new access token. If the write fails,
            // LWA may already have invalidated the old token: the new set is kept in memory (the only copy of
            // the pairing now), the old one is never sent again, and the write is retried on a timer.
            await save(next)
            held = .paired(next)
            refreshing.timeline.refreshed(scheduled, at: time.clock.now, using: &time.random)
            refreshing.secretUnchecked = nil
            time.waker.ring()
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
            logger.error("LWA no longer accepts the refresh token (invalid_grant); pairing again")
            do { try await store.wipe(isolation: self) } catch {
                logger.error("could not remove the token file", metadata: ["error": "\(error)"])
            }
            pairingChanged(to: nil, lostReason: Self.refusedRefreshReason)
            throw error
        } catch  where error.code == .notPaired {
            throw error
        } catch {
            let (delay, attempt, log) = refreshing.timeline.refreshFailed(
                error, at: time.clock.now, using: &time.random)
            time.waker.ring()
            if log {
                logger.warning(
                    "token refresh failed",
                    metadata: [
                        "error.code": "\(error.code)", "error": "\(error.message)", "attempt": "\(attempt)",
                        "token.retryIn": "\(delay.components.seconds)s",
                    ])
            }
            throw AgentError(error.code, error.message, retryAfter: delay)
        }
    }

    /// Writes `next`; on failure keeps it as unsaved and plans another write (5 s doubling to 5 minutes).
    func save(_ next: TokenSet) async {
        do {
            try await store.save(next, isolation: self)
            if refreshing.unsaved { logger.notice("the refreshed tokens are written now") }
            refreshing.timeline.written(failedRetryingIn: nil, at: time.clock.now)
        } catch {
            let (delay, attempt) = refreshing.timeline.writeFailed(at: time.clock.now, using: &time.random)
            logger.error(
                "could not write the tokens; keeping them in memory and trying again",
                metadata: [
                    "error": "\(error.message)", "attempt": "\(attempt)",
                    "token.retryIn": "\(delay.components.seconds)s",
                ])
        }
    }

    func notifyChange() {
        events.publish(.changed(state))
    }
}
