import Foundation
import Logging
import Synchronization
import Testing

@testable import ReplenishAgent

/// Code-based linking: the decisions (`CodeLinking`) on manual-clock instants, the LWA answers
/// (`CodePairClient`), and the service with the token manager on a manual clock against a scripted LWA.
@Suite(.tags(.unit)) struct CodeLinkingTests {
    typealias Linking = CodeLinking<ManualClock.Instant>

    func at(_ seconds: Double) -> ManualClock.Instant {
        ManualClock.Instant(offset: .milliseconds(Int64(seconds * 1000)))
    }

    func issued(expiresIn: Int = 600, interval: Int = 5, userCode: String = "ABC123") -> CodePairClient.Issued {
        .init(
            userCode: userCode, deviceCode: Secret("DC-secret"), verificationURI: "https://amazon.com/us/code",
            expiresIn: .seconds(expiresIn), interval: .seconds(interval))
    }

    static let grant = TokenGrant(accessToken: Secret("Atza|a"), refreshToken: Secret("Atzr|r"), expiresIn: 3600)

    /// A machine that asked for a pair at `start` and got `pair`.
    func linkingWithPair(_ pair: CodePairClient.Issued, at start: Double = 0, seed: UInt64 = 1) -> Linking {
        var linking = Linking(random: .seeded(state: seed))
        linking.handle(.started(paired: false), at: at(start))
        #expect(linking.next(at: at(start)) == .requestCodePair)
        linking.handle(.codePairIssued(pair), at: at(start))
        return linking
    }

    func isPoll(_ action: Linking.Action) -> Bool {
        if case .poll = action { return true }
        return false
    }

    // MARK: decisions

    @Test func pollsNoSoonerThanTheIntervalAfterEachAnswer() {
        var linking = linkingWithPair(issued(interval: 5))
        #expect(linking.shown(at: at(0))?.userCode == "ABC123")
        #expect(linking.next(at: at(0)) == .wait(until: at(5)))
        #expect(linking.next(at: at(4.999)) == .wait(until: at(5)))
        #expect(isPoll(linking.next(at: at(5))))
        // A request is out: nothing else until its answer.
        #expect(linking.next(at: at(5.1)) == .idle)
        // The interval counts from the answer (a slow answer does not shorten the next wait).
        linking.handle(.pollAnswered(.pending), at: at(5.8))
        #expect(linking.next(at: at(10)) == .wait(until: at(10.8)))
        #expect(isPoll(linking.next(at: at(10.8))))
    }

    @Test func slowDownAddsFiveSecondsForTheRestOfThePair() {
        var linking = linkingWithPair(issued(interval: 5))
        #expect(isPoll(linking.next(at: at(5))))
        linking.handle(.pollAnswered(.slowDown), at: at(5))
        #expect(linking.next(at: at(5)) == .wait(until: at(15)))
        #expect(isPoll(linking.next(at: at(15))))
        linking.handle(.pollAnswered(.pending), at: at(15))
        #expect(linking.next(at: at(15)) == .wait(until: at(25)), "the slower interval stays")
        #expect(isPoll(linking.next(at: at(25))))
        linking.handle(.pollAnswered(.slowDown), at: at(25))
        #expect(linking.next(at: at(25)) == .wait(until: at(40)))
        // A new pair starts from LWA's own interval again.
        #expect(isPoll(linking.next(at: at(40))))
        linking.handle(.pollAnswered(.invalidCodePair), at: at(40))
        #expect(linking.next(at: at(40)) == .requestCodePair)
        linking.handle(.codePairIssued(issued(interval: 5)), at: at(41))
        #expect(linking.next(at: at(41)) == .wait(until: at(46)))
    }

    @Test func anExpiredPairIsReplacedAtOnceAndNoLongerShown() {
        var linking = linkingWithPair(issued(expiresIn: 12, interval: 5))
        #expect(isPoll(linking.next(at: at(5))))
        linking.handle(.pollAnswered(.pending), at: at(5))
        #expect(isPoll(linking.next(at: at(10))))
        linking.handle(.pollAnswered(.pending), at: at(10))
        // The next poll would come after the expiry: the machine wakes at the expiry instead.
        #expect(linking.next(at: at(10)) == .wait(until: at(12)))
        #expect(linking.shown(at: at(11.9)) != nil)
        #expect(linking.shown(at: at(12)) == nil)
        #expect(linking.next(at: at(12)) == .requestCodePair)
        linking.handle(.codePairIssued(issued(userCode: "NEW456")), at: at(12.5))
        #expect(linking.shown(at: at(12.5))?.userCode == "NEW456")
    }

    @Test func invalidCodePairGetsANewPairAtOnceButNotInALoop() {
        var linking = linkingWithPair(issued(interval: 1))
        #expect(isPoll(linking.next(at: at(1))))
        linking.handle(.pollAnswered(.invalidCodePair), at: at(1))
        #expect(linking.shown(at: at(1)) == nil)
        #expect(linking.next(at: at(1)) == .requestCodePair)
        // LWA ends every fresh pair at once: the second in a row waits a backoff, longer each time.
        var waits: [Duration] = []
        var now = at(1)
        for _ in 0..<4 {
            linking.handle(.codePairIssued(issued(interval: 1)), at: now)
            now = now.advanced(by: .seconds(1))
            #expect(isPoll(linking.next(at: now)))
            linking.handle(.pollAnswered(.invalidCodePair), at: now)
            guard case .wait(let until) = linking.next(at: now) else {
                Issue.record("no backoff after invalid_code_pair in a row")
                return
            }
            waits.append(now.duration(to: until))
            now = until
            #expect(linking.next(at: now) == .requestCodePair)
        }
        #expect(waits.allSatisfy { $0 >= .seconds(1) })
        #expect(waits.last! > waits.first!)
        // A pending answer shows the pairs work: the next invalid_code_pair gets a new pair at once again.
        linking.handle(.codePairIssued(issued(interval: 1)), at: now)
        #expect(isPoll(linking.next(at: now.advanced(by: .seconds(1)))))
        linking.handle(.pollAnswered(.pending), at: now.advanced(by: .seconds(1)))
        #expect(isPoll(linking.next(at: now.advanced(by: .seconds(2)))))
        linking.handle(.pollAnswered(.invalidCodePair), at: now.advanced(by: .seconds(2)))
        #expect(linking.next(at: now.advanced(by: .seconds(2))) == .requestCodePair)
    }

    @Test func aGrantIsInstalledThenPollingStopsUntilThePairingIsLost() {
        var linking = linkingWithPair(issued(interval: 5))
        #expect(isPoll(linking.next(at: at(5))))
        linking.handle(.pollAnswered(.granted(Self.grant)), at: at(5))
        #expect(linking.shown(at: at(5)) == nil, "the code is used up")
        #expect(linking.next(at: at(5)) == .install(Self.grant))
        linking.handle(.paired, at: at(5))
        #expect(linking.isPaired)
        for second in [5.0, 100, 100_000] { #expect(linking.next(at: at(second)) == .idle) }
        // A late answer of a request sent before the pairing changes nothing.
        linking.handle(.pollAnswered(.invalidCodePair), at: at(6))
        linking.handle(.codePairIssued(issued()), at: at(6))
        #expect(linking.next(at: at(7)) == .idle)
        // Unpaired again (invalid_grant on refresh, re-pairing, reset): linking starts again.
        linking.handle(.pairingLost, at: at(200))
        #expect(linking.next(at: at(200)) == .requestCodePair)
    }

    @Test func aGrantThatCannotBeStoredIsStoredLaterNotLost() {
        var linking = linkingWithPair(issued(interval: 5))
        #expect(isPoll(linking.next(at: at(5))))
        linking.handle(.pollAnswered(.granted(Self.grant)), at: at(5))
        #expect(linking.next(at: at(5)) == .install(Self.grant))
        linking.handle(.installFailed(reason: "no space left on device"), at: at(5))
        guard case .wait(let until) = linking.next(at: at(5)) else {
            Issue.record("no wait after a failed install")
            return
        }
        #expect(at(5).duration(to: until) >= .milliseconds(2500))
        #expect(linking.next(at: until) == .install(Self.grant))
        linking.handle(.installFailed(reason: "no space left on device"), at: until)
        // A long press skips the wait.
        linking.handle(.retryNow, at: until)
        #expect(linking.next(at: until) == .install(Self.grant))
    }

    @Test func failuresBackOffNeverTighterThanTheIntervalOrRetryAfter() {
        // A poll without an answer: the same pair, after max(interval, backoff, Retry-After).
        var linking = linkingWithPair(issued(interval: 30))
        #expect(isPoll(linking.next(at: at(30))))
        linking.handle(.pollAnswered(.failed(.transient(reason: "LWA answered 503", retryAfter: nil))), at: at(30))
        #expect(linking.next(at: at(30)) == .wait(until: at(60)), "the backoff's first step is below the interval")
        #expect(isPoll(linking.next(at: at(60))))
        linking.handle(
            .pollAnswered(.failed(.transient(reason: "LWA answered 429", retryAfter: .seconds(120)))), at: at(60))
        #expect(linking.next(at: at(60)) == .wait(until: at(180)))
        #expect(linking.shown(at: at(100))?.userCode == "ABC123", "the pair is still shown")

        // No code pair: backoff that grows; a configuration fault waits minutes.
        var asking = Linking(random: .seeded(state: 7))
        asking.handle(.started(paired: false), at: at(0))
        var now = at(0)
        var waits: [Duration] = []
        for _ in 0..<6 {
            #expect(asking.next(at: now) == .requestCodePair)
            asking.handle(.codePairFailed(.transient(reason: "network", retryAfter: nil)), at: now)
            guard case .wait(let until) = asking.next(at: now) else { return }
            waits.append(now.duration(to: until))
            now = until
        }
        #expect(waits.allSatisfy { $0 >= Backoff.floor })
        #expect(waits.last! >= .seconds(16), "the sixth retry waits at least half of 64 s")
        #expect(asking.next(at: now) == .requestCodePair)
        asking.handle(.codePairFailed(.configuration(reason: "LWA refused: invalid_client")), at: now)
        guard case .wait(let until) = asking.next(at: now) else { return }
        #expect(now.duration(to: until) >= .seconds(150))
        // Refused polls (access_denied) end the pair: a new one after the backoff.
        var refused = linkingWithPair(issued(interval: 5))
        #expect(isPoll(refused.next(at: at(5))))
        refused.handle(.pollAnswered(.failed(.refused(reason: "LWA refused: access_denied"))), at: at(5))
        #expect(refused.shown(at: at(5)) == nil)
        guard case .wait(let after) = refused.next(at: at(5)) else { return }
        #expect(refused.next(at: after) == .requestCodePair)
    }

    @Test func eventsThatDoNotMatchTheRequestOutAreIgnored() {
        var linking = Linking(random: .seeded(state: 3))
        linking.handle(.started(paired: false), at: at(0))
        #expect(linking.next(at: at(0)) == .requestCodePair)
        // Paired some other way while the request was out: its answer is dropped.
        linking.handle(.paired, at: at(1))
        linking.handle(.codePairIssued(issued()), at: at(2))
        #expect(linking.isPaired && linking.shown(at: at(2)) == nil && linking.next(at: at(3)) == .idle)
        // A paired start does nothing at all.
        var paired = Linking(random: .seeded(state: 3))
        paired.handle(.started(paired: true), at: at(0))
        #expect(paired.next(at: at(0)) == .idle)
        paired.handle(.pollAnswered(.granted(Self.grant)), at: at(1))
        #expect(paired.next(at: at(1)) == .idle)
    }

    /// A thousand seeded LWAs answering at random: no poll ever comes sooner than the interval in force (LWA's,
    /// plus 5 s for each slow_down of that pair) after the previous answer, or at or after the pair's expiry,
    /// or after the device is paired.
    @Test func seededRandomAnswersNeverMakeAPollTooSoon() {
        for seed in UInt64(1)...1000 {
            var random = RandomSource.seeded(state: seed)
            var linking = Linking(random: .seeded(state: seed &* 31))
            linking.handle(.started(paired: false), at: at(0))
            var now = at(0)
            var lastAnswer: ManualClock.Instant?
            var interval = Duration.zero
            var expiresAt = at(0)
            var paired = false
            for _ in 0..<200 {
                let action = linking.next(at: now)
                switch action {
                case .idle:
                    #expect(paired, "seed \(seed): idle while unpaired")
                case .wait(let until):
                    #expect(until > now, "seed \(seed)")
                    now = until
                    continue
                case .requestCodePair:
                    let lifetime = Int.random(in: 1...120, using: &random)
                    let given = Int.random(in: 1...30, using: &random)
                    now = now.advanced(by: .milliseconds(Int64.random(in: 0...3000, using: &random)))
                    if Int.random(in: 0..<10, using: &random) == 0 {
                        linking.handle(.codePairFailed(.transient(reason: "503", retryAfter: nil)), at: now)
                    } else {
                        linking.handle(.codePairIssued(issued(expiresIn: lifetime, interval: given)), at: now)
                        lastAnswer = now
                        interval = .seconds(given)
                        expiresAt = now.advanced(by: .seconds(lifetime))
                    }
                    continue
                case .poll:
                    #expect(!paired, "seed \(seed): polled after pairing")
                    #expect(now < expiresAt, "seed \(seed): polled an expired pair")
                    if let lastAnswer { #expect(lastAnswer.duration(to: now) >= interval, "seed \(seed)") }
                    now = now.advanced(by: .milliseconds(Int64.random(in: 0...5000, using: &random)))
                    lastAnswer = now
                    switch Int.random(in: 0..<20, using: &random) {
                    case 0..<10: linking.handle(.pollAnswered(.pending), at: now)
                    case 10..<14:
                        interval += .seconds(5)
                        linking.handle(.pollAnswered(.slowDown), at: now)
                    case 14..<17:
                        let retryAfter: Duration? =
                            Bool.random(using: &random) ? .seconds(Int.random(in: 0...90, using: &random)) : nil
                        linking.handle(.pollAnswered(.failed(.transient(reason: "x", retryAfter: retryAfter))), at: now)
                    case 17, 18: linking.handle(.pollAnswered(.invalidCodePair), at: now)
                    default: linking.handle(.pollAnswered(.granted(Self.grant)), at: now)
                    }
                    continue
                case .install:
                    paired = true
                    linking.handle(.paired, at: now)
                    continue
                }
                break
            }
        }
    }

    // MARK: LWA's answers

    @Test func codePairAnswersAreCheckedBeforeUse() {
        func body(_ text: String) -> CodePairClient.Issued? { CodePairClient.issued(Array(text.utf8)) }
        let good = body(
            #"{"user_code":"ABC123","device_code":"DC1","verification_uri":"https://amazon.com/us/code","expires_in":600,"interval":30}"#
        )
        #expect(good?.userCode == "ABC123" && good?.expiresIn == .seconds(600) && good?.interval == .seconds(30))
        // Numbers as strings, and RFC 8628's 5 s when the interval is absent.
        let strings = body(#"{"user_code":"A","device_code":"D","verification_uri":"u","expires_in":"600"}"#)
        #expect(strings?.expiresIn == .seconds(600) && strings?.interval == .seconds(5))
        for bad in [
            #"{"user_code":"","device_code":"D","verification_uri":"u","expires_in":600}"#,
            #"{"user_code":"A B","device_code":"D","verification_uri":"u","expires_in":600}"#,
            #"{"user_code":"A","device_code":"D\r\nX: y","verification_uri":"u","expires_in":600}"#,
            #"{"user_code":"A","device_code":"D","verification_uri":"u","expires_in":0}"#,
            #"{"user_code":"A","device_code":"D","verification_uri":"u","expires_in":600,"interval":0}"#,
            #"{"user_code":"A","device_code":"D","verification_uri":"u","expires_in":"soon"}"#,
            #"{"user_code":"A","verification_uri":"u","expires_in":600}"#, "<html>",
        ] {
            #expect(body(bad) == nil, "\(bad)")
        }
    }

    func client(_ http: ScriptedHTTPClient) throws -> CodePairClient {
        CodePairClient(
            lwa: LWAClient(
                http: http, tokenURL: try EndpointURL("http://127.0.0.1:1/auth/o2/token"), clientSecret: nil),
            codePairURL: try EndpointURL("http://127.0.0.1:1/auth/O2/create/codepair"))
    }

    @Test func pollAnswersMeanWhatPROTOCOLSays() async throws {
        func answer(_ status: Int, _ text: String, headers: [(String, String)] = []) async throws
            -> CodePairClient.PollAnswer
        {
            try await client(ScriptedHTTPClient { _ in json(status, text, headers: headers) })
                .poll(deviceCode: Secret("DC"), userCode: "U")
        }
        func error(_ code: String, status: Int = 400) async throws -> CodePairClient.PollAnswer {
            try await answer(status, #"{"error":"\#(code)","error_description":"…"}"#)
        }
        #expect(try await error("authorization_pending") == .pending)
        #expect(try await error("slow_down") == .slowDown)
        #expect(try await error("invalid_code_pair") == .invalidCodePair)
        #expect(try await error("expired_token") == .invalidCodePair)
        #expect(
            try await error("invalid_client", status: 401)
                == .failed(.configuration(reason: "LWA refused: invalid_client")))
        #expect(try await error("access_denied") == .failed(.refused(reason: "LWA refused: access_denied")))
        #expect(
            try await answer(503, "", headers: [("retry-after", "7")])
                == .failed(.transient(reason: "LWA answered 503", retryAfter: .seconds(7))))
        #expect(
            try await answer(200, #"{"access_token":"Atza|a","refresh_token":"Atzr|r","expires_in":3600}"#)
                == .granted(Self.grant))
        guard case .failed(.transient) = try await answer(200, "<html>") else {
            Issue.record("an unreadable 200 is transient")
            return
        }
        let offline = try client(
            ScriptedHTTPClient { (_) throws(AgentError) -> HTTPResponse in
                throw AgentError(.network, "connection refused")
            })
        #expect(
            await offline.poll(deviceCode: Secret("DC"), userCode: "U")
                == .failed(.transient(reason: "connection refused", retryAfter: nil)))
    }

    @Test func requestsCarryExactlyTheFieldsOfPROTOCOL() async throws {
        let http = ScriptedHTTPClient { request in
            if request.url.hasSuffix("codepair") {
                return json(
                    200,
                    #"{"user_code":"U1","device_code":"DC1","verification_uri":"https://amazon.com/us/code","expires_in":600,"interval":30}"#
                )
            }
            return json(400, #"{"error":"authorization_pending"}"#)
        }
        let lwa = try client(http)
        // A released device passes no flags (#29.10): both keys left out, as Amazon's sample devices do.
        let expected: [(AgentConfig.Phase, Bool?, Bool?)] = [
            (.test, true, true), (.certification, false, true), (.production, nil, nil),
        ]
        for (phase, test, nonLive) in expected {
            let result = await lwa.requestCodePair(
                clientId: "amzn1.application-oa2-client.x",
                device: .init(serial: "SN0001", model: "model-1", phase: phase))
            #expect((try? result.get())?.userCode == "U1")
            let form = try #require(Self.form(http.requests.last!))
            #expect(http.requests.last!.url == "http://127.0.0.1:1/auth/O2/create/codepair")
            #expect(Set(form.keys) == ["response_type", "client_id", "scope", "scope_data"])
            #expect(form["response_type"] == "device_code" && form["scope"] == "dash:replenish")
            #expect(form["client_id"] == "amzn1.application-oa2-client.x")
            let scopeData = try #require(
                try JSONSerialization.jsonObject(with: Data(form["scope_data"]!.utf8)) as? [String: [String: Any]])
            let drs = try #require(scopeData["dash:replenish"])
            #expect(drs["serial"] as? String == "SN0001" && drs["device_model"] as? String == "model-1")
            #expect(drs["is_test_device"] as? Bool == test && drs["should_include_non_live"] as? Bool == nonLive)
            #expect(drs.keys.contains("is_test_device") == (test != nil))
            #expect(drs.keys.contains("should_include_non_live") == (nonLive != nil))
        }
        #expect(await lwa.poll(deviceCode: Secret("DC1"), userCode: "U1") == .pending)
        let poll = try #require(Self.form(http.requests.last!))
        #expect(http.requests.last!.url == "http://127.0.0.1:1/auth/o2/token")
        #expect(poll == ["grant_type": "device_code", "device_code": "DC1", "user_code": "U1"])
    }

    /// The form fields of a request body.
    static func form(_ request: HTTPRequest) -> [String: String]? {
        guard let body = request.body, let text = String(bytes: body, encoding: .utf8) else { return nil }
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let value = parts[1].removingPercentEncoding else { return nil }
            fields[parts[0]] = value
        }
        return fields
    }

    // MARK: status

    /// A config of `mode` whose state directory exists (0700), loaded.
    func config(mode: String) throws -> AgentConfig { try ConfigTests.loadedConfig(pairingMode: mode) }

    @Test func statusShowsTheCodeOnlyWhileItCanBeEntered() async throws {
        let code = LinkingCode(
            userCode: "ABC123", verificationURI: "https://amazon.com/us/code", expiresAt: 1_800_000_600)
        let config = try config(mode: "code")
        await ShownStatusBook(runtimeDirectory: config.runtimeDirectory, logger: .init(label: "test"))
            .recordLinkingCode(code)
        func encoded(_ report: StatusCommand.Report) throws -> [String: Any] {
            try JSONSerialization.jsonObject(with: JSONEncoder().encode(report)) as? [String: Any] ?? [:]
        }

        let shown = StatusCommand.report(config: config, now: 1_800_000_000)
        #expect(
            shown.linking
                == .init(
                    userCode: "ABC123", verificationURI: "https://amazon.com/us/code", expiresAt: "2027-01-15T08:10:00Z"
                ))
        #expect(shown.pairingMode == "code" && !shown.paired)
        #expect(shown.pairingState.contains("enter code ABC123 at https://amazon.com/us/code"))
        let json = try encoded(shown)
        #expect(
            (json["linking"] as? [String: String])
                == [
                    "userCode": "ABC123", "verificationURI": "https://amazon.com/us/code",
                    "expiresAt": "2027-01-15T08:10:00Z",
                ])
        // Expired: gone (a stopped agent's code is not offered past its time).
        let expired = StatusCommand.report(config: config, now: 1_800_000_600)
        #expect(try expired.linking == nil && encoded(expired)["linking"] == nil)
        #expect(expired.pairingState.contains("no code to enter yet"))
        // Companion mode never shows one.
        let companion = try self.config(mode: "companion")
        await ShownStatusBook(runtimeDirectory: companion.runtimeDirectory, logger: .init(label: "test"))
            .recordLinkingCode(code)
        #expect(StatusCommand.report(config: companion, now: 1_800_000_000).linking == nil)
        // Paired: gone, whatever the file says.
        try await FileTokenStore(stateDirectory: config.stateDirectory).save(
            TokenSet(
                clientId: "c", refreshToken: Secret("Atzr|r"), accessToken: Secret("Atza|a"),
                accessTokenExpiresAt: 1_800_003_600, accessTokenLifetime: 3600))
        let paired = StatusCommand.report(config: config, now: 1_800_000_000)
        #expect(paired.paired && paired.linking == nil)
    }

    // MARK: the LED

    @Test func aWaitingCodeHasItsOwnPatternWhileUnpaired() {
        var facts = LEDPattern.Facts()
        facts.codeWaiting = true
        #expect(LEDPattern.pattern(for: facts) == .codeWaiting)
        facts.pairingWindowOpen = true
        #expect(LEDPattern.pattern(for: facts) == .codeWaiting)
        facts.acknowledging = true
        #expect(LEDPattern.pattern(for: facts) == .acknowledge, "a press's flash still shows")
        facts.acknowledging = false
        facts.codeWaiting = false
        #expect(LEDPattern.pattern(for: facts) == .pairingMode)
        facts.pairingWindowOpen = false
        #expect(LEDPattern.pattern(for: facts) == .needsAttention, "no code yet (LWA unreachable): attention")
        facts.codeWaiting = true
        facts.paired = true
        #expect(LEDPattern.pattern(for: facts) == .off, "a paired device shows no code")
        // It blinks, unlike any other pattern.
        let steps = LEDPattern.codeWaiting.steps?.map { "\($0.on)\($0.milliseconds)" }
        #expect(steps == ["true1500", "false500"])
        let cycles = LEDPattern.allCases.compactMap { $0.steps?.map { "\($0.on)\($0.milliseconds)" } }
        #expect(cycles.filter { $0 == steps }.count == 1)
    }
}

/// The service with the real token manager, on a manual clock, against a scripted LWA.
@Suite(.tags(.unit)) struct CodeLinkingServiceTests {
    let clock = ManualClock()
    let epoch = 1_800_000_000.0

    /// A scripted LWA: code pairs with `interval` and `lifetime`, polls answered from `answers` (then pending).
    final class LWA: Sendable {
        struct Seen: Sendable {
            var path: String
            var at: ManualClock.Instant
            var form: [String: String]
        }
        let clock: ManualClock
        let interval: Int
        let lifetime: Int
        private let state = Mutex<(answers: [String], seen: [Seen], pairs: Int)>(([], [], 0))

        init(clock: ManualClock, interval: Int, lifetime: Int, answers: [String]) {
            self.clock = clock
            self.interval = interval
            self.lifetime = lifetime
            state.withLock { $0.answers = answers }
        }

        var seen: [Seen] { state.withLock { $0.seen } }
        var polls: [Seen] { seen.filter { $0.path == "token" } }
        var pairs: Int { state.withLock { $0.pairs } }
        func answer(_ next: [String]) { state.withLock { $0.answers += next } }

        var http: ScriptedHTTPClient {
            ScriptedHTTPClient { [self] request in
                let form = CodeLinkingTests.form(request) ?? [:]
                let isPair = request.url.hasSuffix("codepair")
                return state.withLock { state in
                    state.seen.append(Seen(path: isPair ? "codepair" : "token", at: clock.now, form: form))
                    if isPair {
                        state.pairs += 1
                        return json(
                            200,
                            #"{"user_code":"CODE\#(state.pairs)","device_code":"DEVICE-SECRET-\#(state.pairs)","verification_uri":"https://amazon.com/us/code","expires_in":\#(lifetime),"interval":\#(interval)}"#
                        )
                    }
                    let next = state.answers.isEmpty ? "authorization_pending" : state.answers.removeFirst()
                    if next == "granted" {
                        return json(200, #"{"access_token":"Atza|a","refresh_token":"Atzr|r","expires_in":3600}"#)
                    }
                    return json(next == "503" ? 503 : 400, #"{"error":"\#(next)"}"#)
                }
            }
        }
    }

    /// Every log line, with its metadata, for the secret check.
    final class Logs: Sendable {
        let lines = Mutex<[String]>([])
        var text: String { lines.withLock { $0.joined(separator: "\n") } }
        var logger: Logger {
            Logger(label: "test") { _ in Handler(logs: self) }
        }

        struct Handler: LogHandler {
            let logs: Logs
            var metadata: Logger.Metadata = [:]
            var logLevel: Logger.Level = .trace
            subscript(metadataKey key: String) -> Logger.Metadata.Value? {
                get { metadata[key] }
                set { metadata[key] = newValue }
            }
            func log(event: LogEvent) {
                logs.lines.withLock { $0.append("\(event.message) \(event.metadata ?? [:])") }
            }
        }
    }

    /// The linking service with its token manager, driven by their steps (`StepDriver`); the streams the
    /// daemon subscribes are read by the test when it chooses, so nothing runs behind its back.
    struct Running {
        let service: CodeLinker<ManualClock>
        let tokens: TokenManager<ManualClock>
        let store: MemoryTokenStore
        let events: AsyncStream<TokenEvent>
        let changes: AsyncStream<LinkingCode?>
        let driver: StepDriver

        /// Hands the token events published so far to the service, as its `follow` does in the daemon (the
        /// token stream ends here: the rest of the test publishes no token event).
        func followTokens() async {
            tokens.events.finish()
            await service.follow(tokens: events)
        }

        /// What the service published, in order (the stream ends here).
        func published() async -> [LinkingCode?] {
            service.changes.finish()
            var seen: [LinkingCode?] = []
            for await code in changes { seen.append(code) }
            return seen
        }
    }

    func start(_ lwa: LWA, logs: Logs, store: MemoryTokenStore = MemoryTokenStore(), clientSecret: Secret? = nil)
        async throws -> Running
    {
        let lwaClient = LWAClient(
            http: lwa.http, tokenURL: try EndpointURL("http://127.0.0.1:1/auth/o2/token"), clientSecret: clientSecret)
        let tokens = try TokenManager(
            store: store, lwa: lwaClient, clock: clock, wallTime: clock.wallTime(from: epoch),
            random: .seeded(state: 5), logger: logs.logger)
        let service = CodeLinker(
            device: .init(serial: "SN0001", model: "model-1", phase: .test), clientId: "client",
            client: CodePairClient(
                lwa: lwaClient, codePairURL: try EndpointURL("http://127.0.0.1:1/auth/O2/create/codepair")),
            lwa: lwaClient, tokens: tokens, clock: clock, wallTime: clock.wallTime(from: epoch),
            random: .seeded(state: 9),
            logger: logs.logger)
        // Subscriptions first, as the daemon makes them.
        let events = tokens.events.subscribe()
        let changes = service.changes.subscribe()
        await service.handle(.started(paired: await tokens.isPaired))
        return Running(
            service: service, tokens: tokens, store: store, events: events, changes: changes,
            driver: StepDriver(clock: clock, service.step))
    }

    func seconds(_ instant: ManualClock.Instant) -> Double {
        Double(instant.offset.components.seconds) + Double(instant.offset.components.attoseconds) / 1e18
    }

    @Test func linksAfterTheCustomerEntersTheCodeAndStartsAgainWhenUnpaired() async throws {
        let lwa = LWA(
            clock: clock, interval: 5, lifetime: 600,
            answers: ["authorization_pending", "slow_down", "authorization_pending", "503", "granted"])
        let logs = Logs()
        let running = try await start(lwa, logs: logs)
        await running.driver.drain()
        #expect(lwa.pairs == 1)
        #expect(await running.service.shown?.userCode == "CODE1")
        #expect(await running.service.shown?.expiresAt == epoch + 600)
        await running.driver.pass(.seconds(40))
        // Polls at 5 (pending), 10 (slow_down: 10 s from now on), 20 (pending), 30 (503: the same pair after
        // max(10 s, the backoff's 1-2 s)), 40 (granted).
        let times = lwa.polls.map { seconds($0.at) }
        #expect(times == [5, 10, 20, 30, 40], "\(times)")
        #expect(
            lwa.polls.allSatisfy {
                $0.form == ["grant_type": "device_code", "device_code": "DEVICE-SECRET-1", "user_code": "CODE1"]
            })
        // Paired: tokens durable (one save, tagged), the code gone, polling over.
        #expect(running.store.saves == 1 && running.store.tokens?.pairingId != nil)
        #expect(await running.tokens.isPaired)
        #expect(await running.service.shown == nil)
        let requestsWhenPaired = lwa.seen.count
        await running.driver.pass(.seconds(600))
        #expect(lwa.seen.count == requestsWhenPaired, "no LWA request while paired")

        // Unpaired again: a new pair, a new code.
        try await running.tokens.unpair(reason: "test")
        await running.followTokens()
        await running.driver.drain()
        #expect(lwa.pairs == 2)
        #expect(await running.service.shown?.userCode == "CODE2")
        // Shown, gone when paired, a new one when unpaired.
        let published = await running.published().map { $0?.userCode }
        #expect(published == [nil, "CODE1", nil, "CODE2"], "\(published)")
        // The user code is for people (logged); the device code is a secret (never).
        #expect(logs.text.contains("CODE1"))
        let leaked = logs.text.contains("DEVICE-SECRET")
        #expect(!leaked, "a device code reached the log")
    }

    /// #40.6: code-based linking checks the client secret as the companion's pairing does: LWA's refusal of the
    /// check (`invalid_client`: a wrong `lwa.clientSecret`) leaves the device unpaired, says why, and asks for a
    /// new code only after the configuration backoff (at least half of its 5-minute base), never hammering LWA.
    @Test func aWrongClientSecretLeavesTheDeviceUnpaired() async throws {
        let lwa = LWA(clock: clock, interval: 5, lifetime: 600, answers: ["granted", "invalid_client"])
        let logs = Logs()
        let running = try await start(lwa, logs: logs, clientSecret: Secret("a-wrong-secret"))
        await running.driver.pass(.seconds(6))
        let check = lwa.polls.last?.form
        #expect(check?["grant_type"] == "refresh_token" && check?["client_secret"] == "a-wrong-secret")
        #expect(running.store.tokens == nil && running.store.saves == 0)
        #expect(await !running.tokens.isPaired)
        #expect(logs.text.contains("not paired, LWA refused the tokens' check"))
        #expect(lwa.pairs == 1)
        await running.driver.pass(.seconds(140))
        #expect(lwa.pairs == 1, "a new code pair only after the configuration backoff")
        await running.driver.pass(.seconds(3600))
        #expect(lwa.pairs >= 2)
    }

    /// #40.5 and #40.6: a check LWA does not answer (503) says nothing of the secret: the tokens are kept (the
    /// device is paired), `status`'s reason says the secret is not checked yet, and a refresh checks it at
    /// once, with backoff, until LWA answers.
    @Test func aCheckLWADoesNotAnswerKeepsTheTokensAndIsMadeAgain() async throws {
        let lwa = LWA(clock: clock, interval: 5, lifetime: 600, answers: ["granted", "503", "503", "granted"])
        let logs = Logs()
        let running = try await start(lwa, logs: logs, clientSecret: Secret("the-secret"))
        await running.driver.pass(.seconds(6))
        #expect(running.store.tokens != nil)
        #expect(await running.tokens.isPaired)
        let reason = await running.tokens.state.reason ?? ""
        #expect(reason.contains("lwa.clientSecret is not checked yet"), "\(reason)")
        let tokenDriver = StepDriver(clock: clock, running.tokens.step)
        await tokenDriver.pass(.seconds(60))
        let refreshes = lwa.polls.filter { $0.form["grant_type"] == "refresh_token" }
        #expect(refreshes.count == 3, "the check, then refreshes on the backoff until LWA answered")
        #expect(await running.tokens.state.reason == nil)
    }

    @Test func anExpiredCodeIsReplacedAndTheNewOneShown() async throws {
        let lwa = LWA(clock: clock, interval: 2, lifetime: 7, answers: [])
        let running = try await start(lwa, logs: Logs())
        await running.driver.pass(.milliseconds(6500))
        #expect(await running.service.shown?.userCode == "CODE1")
        #expect(lwa.polls.map { seconds($0.at) } == [2, 4, 6])
        #expect(lwa.pairs == 1)
        await running.driver.pass(.milliseconds(500))
        // At 7 s the first code is over: not shown, a new pair asked for at once.
        #expect(lwa.pairs == 2)
        #expect(await running.service.shown?.userCode == "CODE2")
        let shown = await running.published().compactMap { $0?.userCode }
        #expect(shown.first == "CODE1" && shown.last == "CODE2")
        #expect(await running.service.shown?.expiresAt == epoch + 14)
    }
}
