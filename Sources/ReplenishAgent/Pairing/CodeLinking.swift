/// Code-based linking (docs/protocol.md, docs/companion-app.md; `pairing.mode` `code`) as decisions. Pure:
/// events go in (the token manager's, LWA's answers), the time comes from the daemon's clock, and `next(at:)`
/// says what to do now; `CodeLinker` carries it out.
///
/// The rules: an unpaired device gets a code pair; it polls the token endpoint no sooner than `interval`
/// after LWA's previous answer (the first poll `interval` after the pair came); `slow_down` adds 5 s to the
/// interval for the rest of that pair (as RFC 8628 section 3.5 says); a pair that expires, or that LWA calls
/// `invalid_code_pair`, is replaced by a new one; a grant is installed (durable tokens) and polling stops; a
/// lost pairing starts it all again. Failures without an answer (network, 5xx, 429) back off on
/// `Backoff.tokenRefresh`, never sooner than the interval or LWA's `Retry-After`; configuration faults
/// (`invalid_client`) on `Backoff.configurationFault`.
struct CodeLinking<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// A code pair LWA handed out, as the device keeps it.
    struct CodePair: Sendable, Equatable {
        /// What the customer types at `verificationURI`: shown, not secret.
        var userCode: String
        /// What the device polls with: a secret.
        var deviceCode: Secret
        var verificationURI: String
        var expiresAt: Instant
        /// The least time between two polls (LWA's `interval`, plus 5 s for every `slow_down`).
        var interval: Duration
    }

    /// LWA's answers, as `CodePairClient` reads them.
    typealias Issued = CodePairClient.Issued
    typealias Failure = CodePairClient.Failure
    typealias PollAnswer = CodePairClient.PollAnswer

    enum Event: Sendable, Equatable {
        /// The daemon started; `paired` is what the token file said.
        case started(paired: Bool)
        /// Tokens are durable (this linking's, or any other).
        case paired
        /// The tokens were wiped (`invalid_grant` on refresh, re-pairing, reset).
        case pairingLost
        case codePairIssued(Issued)
        case codePairFailed(Failure)
        case pollAnswered(PollAnswer)
        /// The grant could not be stored (`TokenManager.install` failed: a full disk).
        case installFailed(reason: String)
        /// LWA refused the check of the granted tokens (`invalid_client`: a wrong `lwa.clientSecret`): not
        /// paired; a new code pair after the configuration backoff.
        case checkRefused(reason: String)
        /// Skip the wait of a backoff (a long press on the button): try now.
        case retryNow
    }

    /// What to do now.
    enum Action: Sendable, Equatable {
        /// Paired (or a request is out): nothing until an event.
        case idle
        /// Nothing before this instant (or an event).
        case wait(until: Instant)
        case requestCodePair
        case poll(CodePair)
        /// Store the grant (`TokenManager.install`).
        case install(TokenGrant)
    }

    private enum Phase: Sendable, Equatable {
        case paired
        case needsCodePair(notBefore: Instant?)
        case requestingCodePair
        case waiting(CodePair, nextPollAt: Instant)
        case polling(CodePair)
        case installing(TokenGrant, notBefore: Instant?)
        case storing(TokenGrant)
    }

    /// What `RFC 8628` adds to the interval at each `slow_down`.
    static var slowDownStep: Duration { .seconds(5) }

    private var phase: Phase = .paired
    private var random: RandomSource
    /// Code pair requests (and refused polls) in a row without a code pair: the backoff's attempt.
    private(set) var failures = 0
    /// Polls of the current pair in a row without an answer.
    private(set) var pollFailures = 0
    /// Pairs in a row that LWA called `invalid_code_pair` without a single pending answer: an LWA that
    /// refuses every fresh pair at once must not be asked for a new one in a loop.
    private(set) var pairsEndedEarly = 0
    private var installFailures = 0

    init(random: RandomSource = .system) { self.random = random }

    /// Whether the device is linked (nothing to do).
    var isPaired: Bool { phase == .paired }

    /// The code the customer can enter now, if any (not after its expiry).
    func shown(at now: Instant) -> CodePair? {
        switch phase {
        case .waiting(let pair, _), .polling(let pair): now < pair.expiresAt ? pair : nil
        default: nil
        }
    }

    mutating func handle(_ event: Event, at now: Instant) {
        switch event {
        case .started(let paired):
            reset()
            phase = paired ? .paired : .needsCodePair(notBefore: nil)
        case .paired:
            reset()
            phase = .paired
        case .pairingLost:
            if phase == .paired { phase = .needsCodePair(notBefore: nil) }
        case .codePairIssued(let issued):
            guard phase == .requestingCodePair else { return }
            failures = 0
            pollFailures = 0
            let interval = max(issued.interval, .seconds(1))
            let pair = CodePair(
                userCode: issued.userCode, deviceCode: issued.deviceCode, verificationURI: issued.verificationURI,
                expiresAt: now.advanced(by: issued.expiresIn), interval: interval)
            phase = .waiting(pair, nextPollAt: now.advanced(by: interval))
        case .codePairFailed(let failure):
            guard phase == .requestingCodePair else { return }
            phase = .needsCodePair(notBefore: now.advanced(by: delay(after: failure)))
        case .pollAnswered(let answer):
            guard case .polling(var pair) = phase else { return }
            apply(answer, to: &pair, at: now)
        case .checkRefused(let reason):
            guard case .storing = phase else { return }
            phase = .needsCodePair(notBefore: now.advanced(by: delay(after: .configuration(reason: reason))))
        case .installFailed:
            guard case .storing(let grant) = phase else { return }
            installFailures += 1
            let wait = Backoff.stateWrite.delay(attempt: installFailures, using: &random)
            phase = .installing(grant, notBefore: now.advanced(by: wait))
        case .retryNow:
            switch phase {
            case .needsCodePair: phase = .needsCodePair(notBefore: nil)
            case .installing(let grant, _): phase = .installing(grant, notBefore: nil)
            default: break
            }
        }
    }

    private mutating func apply(_ answer: PollAnswer, to pair: inout CodePair, at now: Instant) {
        switch answer {
        case .pending:
            pollFailures = 0
            pairsEndedEarly = 0
            phase = .waiting(pair, nextPollAt: now.advanced(by: pair.interval))
        case .slowDown:
            pollFailures = 0
            pairsEndedEarly = 0
            pair.interval += Self.slowDownStep
            phase = .waiting(pair, nextPollAt: now.advanced(by: pair.interval))
        case .invalidCodePair:
            pollFailures = 0
            pairsEndedEarly += 1
            // The first: a new pair at once (the customer may be waiting for a code). Several in a row with
            // no pending answer between them: LWA refuses fresh pairs, so back off.
            let notBefore =
                pairsEndedEarly <= 1
                ? nil : now.advanced(by: Backoff.tokenRefresh.delay(attempt: pairsEndedEarly - 1, using: &random))
            phase = .needsCodePair(notBefore: notBefore)
        case .granted(let grant):
            phase = .installing(grant, notBefore: nil)
        case .failed(.transient(_, let retryAfter)):
            pollFailures += 1
            var wait = max(pair.interval, Backoff.tokenRefresh.delay(attempt: pollFailures, using: &random))
            if let retryAfter { wait = max(wait, retryAfter) }
            phase = .waiting(pair, nextPollAt: now.advanced(by: wait))
        case .failed(let failure):
            phase = .needsCodePair(notBefore: now.advanced(by: delay(after: failure)))
        }
    }

    /// The wait before the next code pair after `failure`.
    private mutating func delay(after failure: Failure) -> Duration {
        failures += 1
        switch failure {
        case .transient(_, let retryAfter):
            let wait = Backoff.tokenRefresh.delay(attempt: failures, using: &random)
            return max(wait, retryAfter ?? .zero)
        case .configuration:
            return Backoff.configurationFault.delay(attempt: failures, using: &random)
        case .refused:
            return Backoff.tokenRefresh.delay(attempt: failures, using: &random)
        }
    }

    private mutating func reset() {
        failures = 0
        pollFailures = 0
        pairsEndedEarly = 0
        installFailures = 0
    }

    /// What to do at `now`. An action that sends a request marks it as out: its answer is the next event.
    /// A pair whose time is up is dropped here (and a new one asked for).
    mutating func next(at now: Instant) -> Action {
        switch phase {
        case .paired, .requestingCodePair, .polling, .storing:
            return .idle
        case .needsCodePair(let notBefore):
            if let notBefore, now < notBefore { return .wait(until: notBefore) }
            phase = .requestingCodePair
            return .requestCodePair
        case .waiting(let pair, let nextPollAt):
            if now >= pair.expiresAt {
                // Expired before the customer entered it: a new code at once.
                phase = .needsCodePair(notBefore: nil)
                return next(at: now)
            }
            if now < nextPollAt { return .wait(until: min(nextPollAt, pair.expiresAt)) }
            phase = .polling(pair)
            return .poll(pair)
        case .installing(let grant, let notBefore):
            if let notBefore, now < notBefore { return .wait(until: notBefore) }
            phase = .storing(grant)
            return .install(grant)
        }
    }
}
