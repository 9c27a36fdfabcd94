import Foundation
import NIOHTTP1
import Synchronization
import Testing

@testable import ReplenishAgent

/// The token lifecycle on a manual clock: scheduled refresh before expiry, rotation stored first,
/// single-flight refresh, and `invalid_grant` sending the device back to pairing.
@Suite(.tags(.unit)) struct TokenManagerTests {
    let clock = ManualClock()
    let epoch = 1_800_000_000.0

    /// Wall time that moves with the manual clock.
    var wallTime: @Sendable () -> Double { clock.wallTime(from: epoch) }

    func lwa(_ http: any HTTPClient) -> LWAClient {
        LWAClient(http: http, tokenURL: try! EndpointURL("http://127.0.0.1:1/auth/o2/token"), clientSecret: nil)
    }

    func grantResponse(access: String, refresh: String?, expiresIn: String = "10") -> HTTPResponse {
        let refreshField = refresh.map { #","refresh_token":"\#($0)""# } ?? ""
        return json(
            200, #"{"access_token":"\#(access)"\#(refreshField),"token_type":"bearer","expires_in":\#(expiresIn)}"#)
    }

    /// A manager paired with tokens of `lifetime` seconds; its schedule runs as a `StepDriver` steps it.
    func paired(http: ScriptedHTTPClient, store: MemoryTokenStore, lifetime: Double, seed: UInt64)
        async throws
        -> TokenManager<ManualClock>
    {
        let manager = try TokenManager(
            store: store, lwa: lwa(http), clock: clock, wallTime: wallTime,
            random: .seeded(state: seed), logger: .init(label: "test"))
        try await manager.install(
            .init(
                grant: TokenGrant(accessToken: Secret("Atza|a0"), refreshToken: Secret("Atzr|r0"), expiresIn: lifetime)),
            clientId: "client")
        return manager
    }

    @Test func scheduledRefreshCompletesBeforeEveryExpiryOfA10SecondToken() async throws {
        let counter = Mutex(0)
        let wall = wallTime
        let expiries = Mutex<[(issuedAt: Double, expiresAt: Double)]>([])
        let http = ScriptedHTTPClient { request in
            let number = counter.withLock {
                $0 += 1
                return $0
            }
            let body = String(decoding: request.body ?? [], as: UTF8.self)
            #expect(body.contains("grant_type=refresh_token"))
            expiries.withLock { $0.append((wall(), wall() + 10)) }
            return HTTPResponse(
                status: 200, headers: [],
                body: Array(
                    #"{"access_token":"Atza|a\#(number)","refresh_token":"Atzr|r\#(number)","expires_in":10}"#.utf8))
        }
        let store = MemoryTokenStore()
        let manager = try await paired(http: http, store: store, lifetime: 10, seed: 3)
        let driver = StepDriver(clock: clock, manager.step)
        var lastExpiry = epoch + 10
        // Ten lifetimes, 100 ms at a time: the token in use never expires.
        for _ in 0..<1000 {
            await driver.pass(.milliseconds(100))
            let now = wallTime()
            #expect(now < lastExpiry, "the access token expired before it was refreshed")
            if let latest = expiries.withLock({ $0.last }) { lastExpiry = latest.expiresAt }
        }
        let refreshes = counter.withLock { $0 }
        #expect(refreshes >= 10 && refreshes <= 14)
        // Each rotated refresh token was stored.
        #expect(store.tokens?.refreshToken == Secret("Atzr|r\(refreshes)"))
        #expect(store.saves == refreshes + 1)
    }

    /// A manager whose stored access token (of `lifetime` seconds) expired a second ago, and its store.
    func expired(
        refreshToken: String, http: any HTTPClient, lifetime: Double = 3600, seed: UInt64? = nil
    ) throws -> (TokenManager<ManualClock>, MemoryTokenStore) {
        let store = MemoryTokenStore(
            TokenSet(
                clientId: "client", refreshToken: Secret(refreshToken), accessToken: Secret("Atza|old"),
                accessTokenExpiresAt: epoch - 1, accessTokenLifetime: lifetime))
        let manager = try TokenManager(
            store: store, lwa: lwa(http), clock: clock, wallTime: wallTime,
            random: seed.map { .seeded(state: $0) } ?? .system, logger: .init(label: "test"))
        return (manager, store)
    }

    @Test func concurrentCallersShareOneRefresh() async throws {
        let http = ScriptedHTTPClient { _ in
            HTTPResponse(
                status: 200, headers: [], body: Array(#"{"access_token":"Atza|new","expires_in":"3600"}"#.utf8))
        }
        let (manager, store) = try expired(refreshToken: "Atzr|keep", http: http)
        async let first = manager.accessToken()
        async let second = manager.accessToken()
        let tokens = try await [first, second]
        #expect(tokens == [Secret("Atza|new"), Secret("Atza|new")])
        #expect(http.requests.count == 1)
        // No refresh token came back: the old one is kept.
        #expect(store.tokens?.refreshToken == Secret("Atzr|keep"))
        #expect(store.tokens?.accessTokenExpiresAt == epoch + 3600)
    }

    @Test func invalidGrantWipesTokensAndAsksForPairing() async throws {
        let http = ScriptedHTTPClient { _ in json(400, #"{"error":"invalid_grant","error_description":"revoked"}"#) }
        let (manager, store) = try expired(refreshToken: "Atzr|gone", http: http)
        let events = manager.events.subscribe()
        await #expect(throws: AgentError.self) { try await manager.accessToken() }
        #expect(store.tokens == nil)
        // Published before the call returned: the stream holds it (finishing ends the stream after it).
        manager.events.finish()
        var seen: [TokenEvent] = []
        for await event in events { seen.append(event) }
        #expect(seen.contains(.pairingLost))
        #expect(seen.last == .changed(.needsPairing(reason: TokenManager<ManualClock>.refusedRefreshReason)))
        #expect(await manager.state == .needsPairing(reason: TokenManager<ManualClock>.refusedRefreshReason))
        await #expect(throws: AgentError.self) { try await manager.accessToken() }
        #expect(http.requests.count == 1)
    }

    @Test func aLifetimeOfOneSecondDoesNotTurnTheScheduleIntoALoop() async throws {
        let http = ScriptedHTTPClient { [self] _ in grantResponse(access: "Atza|short", refresh: nil, expiresIn: "1") }
        let manager = try await paired(http: http, store: MemoryTokenStore(), lifetime: 1, seed: 5)
        await StepDriver(clock: clock, manager.step).pass(.seconds(60))
        // 60 s with a 5 s minimum spacing: at most 13 scheduled refreshes (not one per pass of the loop).
        let refreshes = http.requests.count
        #expect(refreshes >= 10 && refreshes <= 13, "\(refreshes) refreshes in 60 s")
    }

    /// The refresh token a request presented (form fields are percent-encoded: `|` is `%7C`).
    static func presentedRefreshToken(_ request: HTTPRequest) -> String? {
        let body = String(decoding: request.body ?? [], as: UTF8.self)
        return body.split(separator: "&").first { $0.hasPrefix("refresh_token=") }
            .map { $0.dropFirst("refresh_token=".count).replacingOccurrences(of: "%7C", with: "|") }
    }

    @Test func aRotatedTokenThatCannotBeWrittenIsKeptRetriedAndTheOldOneNeverSentAgain() async throws {
        // A strict LWA: every refresh rotates the refresh token and invalidates the old one at once.
        let valid = Mutex("Atzr|old")
        let presented = Mutex<[String]>([])
        let http = ScriptedHTTPClient { [self] request in
            let token = Self.presentedRefreshToken(request) ?? ""
            presented.withLock { $0.append(token) }
            return valid.withLock { current -> HTTPResponse in
                guard token == current else { return json(400, #"{"error":"invalid_grant"}"#) }
                let number = presented.withLock { $0.count }
                current = "Atzr|r\(number)"
                return grantResponse(access: "Atza|a\(number)", refresh: current, expiresIn: "3600")
            }
        }
        let (manager, store) = try expired(refreshToken: "Atzr|old", http: http, seed: 5)
        let driver = StepDriver(clock: clock, manager.step)
        store.failSaves = true
        // LWA rotated, the disk is full: the new set is used (LWA no longer accepts the old one) and kept.
        #expect(try await manager.accessToken() == Secret("Atza|a1"))
        #expect(store.tokens?.refreshToken == Secret("Atzr|old"))
        // DRS rejects that access token: the next refresh presents the rotated token, never the old one.
        #expect(try await manager.accessTokenReplacing(Secret("Atza|a1")) == Secret("Atza|a2"))
        #expect(presented.withLock { $0 } == ["Atzr|old", "Atzr|r1"])
        // Writes keep failing for a minute, then the disk has room: the retried write lands the newest set.
        await driver.pass(.seconds(60))
        #expect(store.tokens?.refreshToken == Secret("Atzr|old"))
        store.failSaves = false
        // The write backoff is 5 minutes at most.
        await driver.pass(Backoff.stateWrite.ceiling(attempt: 100))
        #expect(store.tokens?.refreshToken == Secret("Atzr|r2"))
        #expect(await manager.isPaired)
        #expect(!presented.withLock { $0 }.dropFirst().contains("Atzr|old"))
    }

    @Test func whileLWAFailsCallersFailFastUntilTheOneBackoffDeadline() async throws {
        let http = ScriptedHTTPClient { _ in json(503, "", headers: [("retry-after", "40")]) }
        let (manager, _) = try expired(refreshToken: "Atzr|r", http: http, seed: 9)
        do {
            _ = try await manager.accessToken()
            Issue.record("LWA is down: no token")
        } catch {
            // LWA's Retry-After (40 s) is longer than the first backoff step: it is what the caller waits.
            #expect(error.retryAfter == .seconds(40))
        }
        #expect(http.requests.count == 1)
        // A hundred callers in the next 39 s ask LWA nothing and are each told how long is left.
        for second in 0..<39 {
            for _ in 0..<3 {
                do {
                    _ = try await manager.accessToken()
                    Issue.record("no token while LWA is down")
                } catch {
                    #expect(error.retryAfter == .seconds(40 - second))
                }
            }
            clock.advance(by: .seconds(1))
        }
        #expect(http.requests.count == 1)
        clock.advance(by: .seconds(1))
        _ = try? await manager.accessToken()
        #expect(http.requests.count == 2)
    }

    @Test func theLifetimeCountsFromWhenTheRequestLeft() async throws {
        // LWA takes 20 s to answer a 60 s token: it expires 60 s after the request left, not after the answer.
        let http = GatedHTTPClient(grantResponse(access: "Atza|slow", refresh: nil, expiresIn: "60"))
        let (manager, store) = try expired(refreshToken: "Atzr|r", http: http, lifetime: 60)
        let sentAt = wallTime()
        let call = Task { try await manager.accessToken() }
        await http.requestArrived()
        clock.advance(by: .seconds(20))
        http.open()
        #expect(try await call.value == Secret("Atza|slow"))
        #expect(store.tokens?.accessTokenExpiresAt == sentAt + 60)
    }

    /// An owner change while a refresh is out (LWA rotating refresh tokens, the old one ended at once): the
    /// unpair waits for the answer, returns the rotated tokens (the deregistration's, which LWA still accepts)
    /// and then forgets them; the pairing does not come back.
    @Test func anUnpairWhileARefreshIsOutReturnsTheRotatedTokensAndForgetsThem() async throws {
        let http = GatedHTTPClient(grantResponse(access: "Atza|late", refresh: "Atzr|late"))
        let (manager, store) = try expired(refreshToken: "Atzr|old", http: http)
        let refresh = Task { try await manager.accessToken() }
        await http.requestArrived()
        // The customer long-presses to unpair while LWA's answer is on its way.
        let unpair = Task { try await manager.unpair(reason: "re-pairing requested") }
        // Yields give the unpair its chance to run ahead of the answer (nothing here waits in real time); had it
        // gone ahead without waiting, it would have wiped the store and returned the old set.
        for _ in 0..<200 { await Task.yield() }
        #expect(store.tokens != nil, "nothing is wiped while the refresh is out")
        http.open()
        // It waited for the answer: what it returns is the rotated set.
        let had = try await unpair.value
        #expect(had?.refreshToken == Secret("Atzr|late"))
        _ = try? await refresh.value
        #expect(store.tokens == nil)
        #expect(await manager.isPaired == false)
        #expect(await manager.state == .needsPairing(reason: "re-pairing requested"))
    }

    @Test func lwaAnswersBecomeTypedErrors() throws {
        func code(_ response: HTTPResponse) -> AgentError.Code? {
            do {
                _ = try LWAClient.interpret(response)
                return nil
            } catch { return error.code }
        }
        #expect(code(json(400, #"{"error":"invalid_grant"}"#)) == .applicationNotAuthorized)
        #expect(code(json(401, #"{"error":"invalid_client"}"#)) == .unauthorizedClient)
        #expect(code(json(400, #"{"error":"unauthorized_client"}"#)) == .unauthorizedClient)
        #expect(code(json(400, #"{"error":"invalid_request"}"#)) == .invalidInput)
        #expect(code(json(503, "")) == .server)
        #expect(code(json(200, "<html>")) == .server)
        #expect(code(json(200, #"{"access_token":"","expires_in":3600}"#)) == .server)
        let grant = try LWAClient.interpret(
            json(200, #"{"access_token":"Atza|x","refresh_token":"Atzr|y","expires_in":"3573"}"#))
        #expect(grant.expiresIn == 3573 && grant.refreshToken == Secret("Atzr|y"))
    }
}
