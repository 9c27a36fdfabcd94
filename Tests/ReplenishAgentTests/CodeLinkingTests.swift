import Foundation
import Logging
import Synchronization
import Testing

@testable import ReplenishAgent

/// Code-based linking: the decisions (`CodeLinking`) on manual-clock instants. LWA's answers, `status` and the
/// LED are `CodePairClientTests`; the service on a manual clock against a scripted LWA `CodeLinkingServiceTests`.
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
}
