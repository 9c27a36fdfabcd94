import Logging

/// Keeps the device's access token fresh: refreshes on a schedule before expiry, at once when DRS rejects a
/// token, and single-flight (concurrent callers share one refresh). A rotated refresh token is written
/// durably before the new access token is used. `invalid_grant` means the customer removed the device: the
/// tokens are wiped and the agent goes back to pairing mode.
actor TokenManager<C: Clock> where C.Duration == Duration {
    /// The lifecycle: unpaired → fresh → refreshing → (fresh | retry-wait | needs-pairing). What `status`
    /// shows of the tokens (never a token).
    enum State: Sendable, Equatable {
        case unpaired
        case fresh(expiresAt: Double)
        case refreshing(expiresAt: Double)
        case retryWait(expiresAt: Double, reason: String)
        case needsPairing(reason: String)

        var name: String {
            switch self {
            case .unpaired: "unpaired"
            case .fresh: "fresh"
            case .refreshing: "refreshing"
            case .retryWait: "retry-wait"
            case .needsPairing: "needs-pairing"
            }
        }

        var reason: String? {
            switch self {
            case .retryWait(_, let reason), .needsPairing(let reason): reason
            default: nil
            }
        }
    }

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
    private var lastLoggedFailure: String?
    /// The last refresh failure, until a refresh succeeds (the retry-wait state).
    private var lastFailure: String?
    private var jitter: Double
    private var pairingLostHandlers: [@Sendable () async -> Void] = []
    private var changeHandlers: [@Sendable (State) async -> Void] = []
    private var pairedHandlers: [@Sendable () async -> Void] = []

    init(
        store: any TokenStore, lwa: LWAClient, clock: C, wallTime: @escaping @Sendable () -> Double,
        random: RandomSource = .system, logger: Logger
    ) throws(AgentError) {
        self.store = store
        self.lwa = lwa
        self.clock = clock
        self.wallTime = wallTime
        self.logger = logger
        self.random = random
        self.jitter = Double.random(in: 0..<1, using: &self.random)
        self.tokens = try store.load()
    }

    var state: State {
        if let tokens {
            if inFlight != nil { return .refreshing(expiresAt: tokens.accessTokenExpiresAt) }
            if let lastFailure { return .retryWait(expiresAt: tokens.accessTokenExpiresAt, reason: lastFailure) }
            return .fresh(expiresAt: tokens.accessTokenExpiresAt)
        }
        if let lostReason { return .needsPairing(reason: lostReason) }
        return .unpaired
    }

    var isPaired: Bool { tokens != nil }

    /// Called after the tokens are wiped because LWA no longer accepts them.
    func onPairingLost(_ handler: @escaping @Sendable () async -> Void) { pairingLostHandlers.append(handler) }

    /// Called after a pairing stored new tokens.
    func onPaired(_ handler: @escaping @Sendable () async -> Void) { pairedHandlers.append(handler) }

    /// Called after every change of `state` (pairing, refresh, loss).
    func onChange(_ handler: @escaping @Sendable (State) async -> Void) { changeHandlers.append(handler) }

    /// Stores the tokens from a pairing durably, then starts using them.
    func install(_ grant: TokenGrant, clientId: String) async throws(AgentError) {
        guard let refreshToken = grant.refreshToken else {
            throw AgentError(.server, "LWA redeemed the code but sent no refresh token")
        }
        let now = wallTime()
        let fresh = TokenSet(
            clientId: clientId, refreshToken: refreshToken, accessToken: grant.accessToken,
            accessTokenExpiresAt: now + grant.expiresIn, accessTokenLifetime: grant.expiresIn)
        try store.save(fresh)
        tokens = fresh
        lostReason = nil
        lastFailure = nil
        failures = 0
        waker.ring()
        logger.info("paired", metadata: ["token.expiresIn": "\(Int(grant.expiresIn))"])
        await notifyChange()
        for handler in pairedHandlers { await handler() }
    }

    /// Forgets the pairing on the customer's request (re-pairing from the button): wipes the tokens and
    /// goes back to pairing mode. The outbox is kept.
    func unpair(reason: String) async throws(AgentError) {
        try store.wipe()
        tokens = nil
        lostReason = reason
        lastFailure = nil
        waker.ring()
        logger.notice("pairing forgotten", metadata: ["token.reason": "\(reason)"])
        await notifyChange()
        for handler in pairingLostHandlers { await handler() }
    }

    /// An access token that is not expired, refreshing first when it is (or is about to be).
    func accessToken() async throws(AgentError) -> Secret {
        guard let current = tokens else { throw AgentError(.notPaired, "the device is not paired") }
        if !RefreshSchedule.isTooCloseToExpiry(now: wallTime(), expiresAt: current.accessTokenExpiresAt) {
            return current.accessToken
        }
        return try await refresh(reason: "expiring").accessToken
    }

    /// DRS rejected `rejected`: refresh now, unless another caller already replaced that token.
    func accessTokenReplacing(_ rejected: Secret) async throws(AgentError) -> Secret {
        if let current = tokens, current.accessToken != rejected,
            !RefreshSchedule.isTooCloseToExpiry(now: wallTime(), expiresAt: current.accessTokenExpiresAt)
        {
            return current.accessToken
        }
        return try await refresh(reason: "rejected by DRS").accessToken
    }

    /// Refreshes once; concurrent callers wait for the same refresh.
    @discardableResult
    func refresh(reason: String) async throws(AgentError) -> TokenSet {
        if let inFlight { return try await Self.value(of: inFlight) }
        guard tokens != nil else { throw AgentError(.notPaired, "the device is not paired") }
        let task = Task { try await self.performRefresh(reason: reason) }
        inFlight = task
        await notifyChange()
        let result: Result<TokenSet, AgentError>
        do { result = .success(try await Self.value(of: task)) } catch { result = .failure(error) }
        inFlight = nil
        await notifyChange()
        return try result.get()
    }

    private static func value(of task: Task<TokenSet, any Error>) async throws(AgentError) -> TokenSet {
        do { return try await task.value } catch let error as AgentError { throw error } catch {
            throw AgentError(.network, "refresh interrupted")
        }
    }

    private func performRefresh(reason: String) async throws(AgentError) -> TokenSet {
        guard let current = tokens else { throw AgentError(.notPaired, "the device is not paired") }
        logger.debug("refreshing access token", metadata: ["token.reason": "\(reason)"])
        do throws(AgentError) {
            let grant = try await lwa.refresh(refreshToken: current.refreshToken, clientId: current.clientId)
            // The customer may have unpaired or paired again while LWA answered: this grant belongs to a pairing
            // that is gone, and writing it would bring that pairing back.
            guard tokens?.refreshToken == current.refreshToken else {
                throw AgentError(.notPaired, "the pairing changed during the refresh")
            }
            let now = wallTime()
            let next = TokenSet(
                clientId: current.clientId, refreshToken: grant.refreshToken ?? current.refreshToken,
                accessToken: grant.accessToken, accessTokenExpiresAt: now + grant.expiresIn,
                accessTokenLifetime: grant.expiresIn)
            // The new refresh token is written before anything uses the new access token: if LWA has already
            // invalidated the old one, this write is the only copy of the pairing.
            try store.save(next)
            tokens = next
            failures = 0
            lastLoggedFailure = nil
            lastFailure = nil
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
            do { try store.wipe() } catch {
                logger.error("could not remove the token file", metadata: ["error": "\(error)"])
            }
            tokens = nil
            lostReason = "LWA refused the refresh token (invalid_grant)"
            lastFailure = nil
            waker.ring()
            for handler in pairingLostHandlers { await handler() }
            throw error
        } catch  where error.code == .notPaired {
            throw error
        } catch {
            failures += 1
            lastFailure = error.message
            if lastLoggedFailure != error.message || error.code != .unauthorizedClient {
                logger.warning(
                    "token refresh failed",
                    metadata: ["error.code": "\(error.code)", "error": "\(error.message)", "attempt": "\(failures)"])
                lastLoggedFailure = error.message
            }
            throw error
        }
    }

    private func notifyChange() async {
        let state = state
        for handler in changeHandlers { await handler(state) }
    }

    /// Scheduled refreshes are at least this far apart, whatever lifetime LWA grants: an answer with a
    /// lifetime of a second or two must not turn the schedule into a loop of LWA calls and flash writes. The
    /// shortest lifetime the contract names (10 s) refreshes about every 7.5 s, so this never delays it.
    static var minimumRefreshSpacing: Duration { .seconds(5) }

    /// The schedule: sleeps until the refresh margin, refreshes, backs off on failure; wakes early when
    /// tokens change. Sleeps are capped so the wall-clock expiry is re-checked after a suspend or clock step.
    func run() async {
        var lastError: AgentError?
        var lastScheduledRefresh: C.Instant?
        while !Task.isCancelled {
            guard let current = tokens else {
                await waker.wait(timeout: nil, clock: clock)
                continue
            }
            if let error = lastError {
                let backoff = error.code == .unauthorizedClient ? Backoff.configurationFault : Backoff.tokenRefresh
                let delay = backoff.delay(attempt: failures, using: &random)
                lastError = nil
                await waker.wait(timeout: max(delay, .milliseconds(200)), clock: clock)
                continue
            }
            let seconds = RefreshSchedule.secondsUntilRefresh(
                now: wallTime(), expiresAt: current.accessTokenExpiresAt, lifetime: current.accessTokenLifetime,
                jitter: jitter)
            if seconds > 0 {
                await waker.wait(timeout: .milliseconds(Int64(min(seconds, 300) * 1000)), clock: clock)
                continue
            }
            if let last = lastScheduledRefresh, clock.now < last.advanced(by: Self.minimumRefreshSpacing) {
                await waker.wait(
                    timeout: clock.now.duration(to: last.advanced(by: Self.minimumRefreshSpacing)), clock: clock)
                continue
            }
            do {
                try await refresh(reason: "scheduled")
                // Only a success starts the spacing: a failure's retry follows the backoff.
                lastScheduledRefresh = clock.now
            } catch {
                if error.code != .applicationNotAuthorized && error.code != .notPaired { lastError = error }
            }
        }
    }
}
