import Logging

/// Carries out code-based linking (`pairing.mode` `code`): every decision is `CodeLinking`'s; this only asks
/// LWA at the clock's time, stores a grant through `TokenManager.install` (durable, tagged, as a companion
/// pairing is), and publishes the code the customer can enter (status file, LED). Runs only in code mode.
final actor CodeLinker<C: Clock> where C.Duration == Duration {
    private var linking: CodeLinking<C.Instant>
    private let client: CodePairClient
    /// For the check of the client secret before the tokens are stored (`LWAClient.checkedAtPairing`).
    private let lwa: LWAClient
    private let device: AgentConfig.Device
    private let clientId: String
    private let tokens: TokenManager<C>
    private let clock: C
    private let wallTime: @Sendable () -> Double
    private let logger: Logger
    private let waker = Waker()
    /// The code shown, at every change (and once at the start, nil or not); published, never awaited.
    nonisolated let changes = Broadcast<LinkingCode?>()
    /// What was published last (the outer nil: nothing yet).
    private var published: LinkingCode??

    init(
        device: AgentConfig.Device, clientId: String, client: CodePairClient, lwa: LWAClient, tokens: TokenManager<C>,
        clock: C, wallTime: @escaping @Sendable () -> Double, random: RandomSource = .system, logger: Logger
    ) {
        linking = CodeLinking(random: random)
        self.device = device
        self.clientId = clientId
        self.client = client
        self.lwa = lwa
        self.tokens = tokens
        self.clock = clock
        self.wallTime = wallTime
        self.logger = logger
    }

    /// The wall-clock expiry of the pair shown, computed once per pair (whole seconds), so that what is
    /// published does not wobble with every reading of the two clocks.
    private var wallExpiry: (deviceCode: Secret, at: Double)?

    /// The code the customer can enter now, if any.
    var shown: LinkingCode? {
        let now = clock.now
        guard let pair = linking.shown(at: now) else { return nil }
        if wallExpiry?.deviceCode != pair.deviceCode {
            let at = wallTime() + PairingWindowKeeper<C>.seconds(now.duration(to: pair.expiresAt))
            wallExpiry = (pair.deviceCode, at.rounded(.down))
        }
        return LinkingCode(
            userCode: pair.userCode, verificationURI: pair.verificationURI, expiresAt: wallExpiry?.at ?? 0)
    }

    var isPaired: Bool { linking.isPaired }

    func handle(_ event: CodeLinking<C.Instant>.Event) {
        linking.handle(event, at: clock.now)
        waker.ring()
        publish()
    }

    /// Publishes the current code again, changed or not (after a factory reset wiped the status file).
    func republish() {
        published = nil
        publish()
    }

    private func publish() {
        let current = shown
        if let published, published == current { return }
        published = .some(current)
        changes.publish(current)
    }

    /// Asks, polls, waits and installs until cancelled.
    func run() async {
        while !Task.isCancelled { await waker.wait(for: await step(), clock: clock) }
    }

    /// Carries out the linking's actions until it says wait; returns the wait.
    func step() async -> LoopStep<C.Instant> {
        var worked = false
        while !Task.isCancelled {
            let action = linking.next(at: clock.now)
            publish()
            switch action {
            case .idle:
                return .wait(until: nil, worked: worked)
            case .wait(let until):
                return .wait(until: until, worked: worked)
            case .requestCodePair:
                worked = true
                logger.info("code-based linking: asking LWA for a code pair")
                switch await client.requestCodePair(clientId: clientId, device: device) {
                case .success(let issued):
                    logger.notice(
                        "code-based linking: enter the code to link this device",
                        metadata: [
                            "linking.userCode": "\(issued.userCode)",
                            "linking.verificationURI": "\(issued.verificationURI)",
                            "linking.expiresIn": "\(issued.expiresIn.components.seconds)s",
                            "linking.interval": "\(issued.interval.components.seconds)s",
                        ])
                    handle(.codePairIssued(issued))
                case .failure(let failure):
                    handle(.codePairFailed(failure))
                    logger.warning(
                        "code-based linking: no code pair", metadata: ["error": "\(failure.reason)"])
                }
            case .poll(let pair):
                worked = true
                let answer = await client.poll(deviceCode: pair.deviceCode, userCode: pair.userCode)
                log(answer, interval: pair.interval)
                handle(.pollAnswered(answer))
            case .install(let grant):
                worked = true
                // The client secret, checked as the companion's pairing checks it: only LWA's definite refusal
                // (`invalid_client`) stops the linking, which asks for a new code after the configuration
                // backoff; a check LWA did not answer keeps the tokens and is made again by the token manager.
                let checked: LWAClient.CheckedGrant
                do { checked = try await lwa.checkedAtPairing(grant, clientId: clientId) } catch {
                    logger.error(
                        "code-based linking: not paired, LWA refused the tokens' check",
                        metadata: ["error.code": "\(error.code)", "error": "\(error.message)"])
                    handle(.checkRefused(reason: error.message))
                    continue
                }
                do {
                    try await tokens.install(checked, clientId: clientId)
                    handle(.paired)
                } catch {
                    logger.error(
                        "code-based linking: could not store the tokens; trying again",
                        metadata: ["error.code": "\(error.code)", "error": "\(error.message)"])
                    handle(.installFailed(reason: error.message))
                }
            }
        }
        return .wait(until: nil, worked: worked)
    }

    private func log(_ answer: CodePairClient.PollAnswer, interval: Duration) {
        switch answer {
        case .pending:
            logger.debug("code-based linking: the code has not been entered yet")
        case .slowDown:
            logger.notice(
                "code-based linking: LWA asked to poll less often",
                metadata: [
                    "linking.interval": "\((interval + CodeLinking<C.Instant>.slowDownStep).components.seconds)s"
                ])
        case .invalidCodePair:
            logger.notice("code-based linking: LWA ended the code pair (invalid_code_pair); asking for a new one")
        case .granted:
            logger.notice("code-based linking: the code was entered; storing the tokens")
        case .failed(let failure):
            logger.warning("code-based linking: poll failed", metadata: ["error": "\(failure.reason)"])
        }
    }
}

extension CodeLinker: TokenFollower {
    /// A pairing stops the linking; a lost pairing starts it again.
    nonisolated func follow(tokens: AsyncStream<TokenEvent>) async {
        await tokens.forEachPairingChange { paired in await handle(paired ? .paired : .pairingLost) }
    }
}
