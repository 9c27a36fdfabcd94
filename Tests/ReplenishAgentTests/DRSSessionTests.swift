import Foundation
import Synchronization
import Testing

@testable import ReplenishAgent

/// The one DRS session: one refresh when DRS rejects the token, never a second; `Retry-After` in the error;
/// and no DRS call made anywhere else in the agent.
@Suite(.tags(.unit)) struct DRSSessionTests {
    /// Access tokens `Atza|t0`, `Atza|t1`, …: each replacement is the next, and the replacements are counted.
    final class CountingTokens: AccessTokens {
        let replaced = Mutex(0)
        func accessToken() async throws(AgentError) -> Secret {
            Secret("Atza|t\(replaced.withLock { $0 })")
        }
        func accessTokenReplacing(_ rejected: Secret) async throws(AgentError) -> Secret {
            let next = replaced.withLock { count in
                count += 1
                return count
            }
            return Secret("Atza|t\(next)")
        }
        func pairing() async -> TokenPairing? { TokenPairing(pairingId: nil, hasUsableAccessToken: true) }
    }

    func session(_ answer: @escaping @Sendable (HTTPRequest) -> HTTPResponse) throws
        -> (DRSSession, ScriptedHTTPClient, CountingTokens)
    {
        let http = ScriptedHTTPClient { request in answer(request) }
        let tokens = CountingTokens()
        let client = DRSClient(http: http, baseURL: try EndpointURL("http://127.0.0.1:1"))
        return (DRSSession(client: client, tokens: tokens), http, tokens)
    }

    func bearer(_ request: HTTPRequest) -> String? {
        request.headers.first { $0.0 == "Authorization" }?.1
    }

    @Test func aRejectedTokenIsRefreshedOnceAndTheCallMadeAgainWithTheNewOne() async throws {
        let (session, http, tokens) = try session { request in
            request.headers.contains { $0.1 == "Bearer Atza|t0" } ? json(401, "{}") : json(200, "{}")
        }
        let answer = try await session.sendExpectingSuccess(.deviceStatus(mostRecentlyActive: 1_800_000_000))
        #expect(answer.status == 200)
        #expect(http.requests.map(bearer) == ["Bearer Atza|t0", "Bearer Atza|t1"])
        #expect(tokens.replaced.withLock { $0 } == 1)
    }

    @Test func aSecondRejectionIsTheAnswerNotAnotherRefresh() async throws {
        let (session, http, tokens) = try session { _ in json(401, "{}") }
        await #expect(throws: AgentError.self) { try await session.sendExpectingSuccess(.subscriptionInfo) }
        #expect(http.requests.count == 2)
        #expect(tokens.replaced.withLock { $0 } == 1)
        do {
            try await session.sendExpectingSuccess(.deregister)
            Issue.record("a rejected call must throw")
        } catch {
            #expect(error.message == "deregister answered 401: DRS rejected the access token")
        }
    }

    @Test func anErrorAnswerCarriesRetryAfterAndOtherAnswersAreNotRetried() async throws {
        let (session, http, tokens) = try session { _ in json(503, "{}", headers: [("retry-after", "120")]) }
        do {
            try await session.sendExpectingSuccess(
                .slotStatus(
                    slot: "slot-1",
                    report: .init(
                        remaining: 1, original: 4, lastUse: 1_800_000_000, expectedReplenishment: 1_800_000_000)))
            Issue.record("a 503 must throw")
        } catch {
            #expect(error.code == .server)
            #expect(error.retryAfter == .seconds(120))
            #expect(error.message == "slotStatus answered 503")
        }
        #expect(http.requests.count == 1)
        #expect(tokens.replaced.withLock { $0 } == 0)
    }

    /// A DRS request is made in `DRSSession.swift` alone: `DRSClient`'s fields are private to that file, so the
    /// compiler refuses a request made elsewhere. A single try without the session's one refresh (`sendOnce`) is
    /// the session's and the delivery loop's, whose tries follow the same rule through `DeliveryPolicy`.
    @Test func theSessionAloneMakesADRSRequestAndOnlyTheDeliveryLoopTriesOnce() throws {
        let calls = try NSRegularExpression(pattern: #"(sendOnce)\(.*token:"#)
        var callers: Set<String> = []
        var fieldsPrivate = false
        for file in try BoundaryTests.agentSources() {
            for line in file.lines where !BoundaryTests.matches(calls, BoundaryTests.code(line)).isEmpty {
                callers.insert(file.path)
            }
            if file.path == "Orders/DRSSession.swift" {
                fieldsPrivate =
                    file.lines.contains { $0.contains("fileprivate let http: any HTTPClient") }
                    && file.lines.contains { $0.contains("fileprivate let baseURL: EndpointURL") }
            }
        }
        #expect(fieldsPrivate)
        #expect(callers == ["Orders/DRSSession.swift", "Orders/DeliveryLoop.swift"])
        // The scan finds a try where one is, and not the supply reporter's own `sendOnce()`.
        #expect(!BoundaryTests.matches(calls, "try await drs.sendOnce(.replenish(slot: slot), token: token)").isEmpty)
        #expect(BoundaryTests.matches(calls, "case .send: await sendOnce()").isEmpty)
    }
}
