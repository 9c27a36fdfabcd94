import Foundation
import Logging
import Synchronization
import Testing

@testable import ReplenishAgent

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
                let form = CodePairClientTests.form(request) ?? [:]
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

    func start(
        _ lwa: LWA, logs: CapturedLogs, store: MemoryTokenStore = MemoryTokenStore(), clientSecret: Secret? = nil
    )
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
        let logs = CapturedLogs()
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
        let logs = CapturedLogs()
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
        let logs = CapturedLogs()
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
        let running = try await start(lwa, logs: CapturedLogs())
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
