import Foundation
import Testing

@testable import ReplenishAgent

/// The transport under the agent, against the real binaries: nothing is sent that the agent did not decide to
/// send (libcurl never resends a replenish by itself), token refresh has its own lane, proxies are never used.
/// The emulator numbers connections and the requests on each, so these are counts, not timings.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct TransportTests {
    /// How the emulator treats kept-alive connections.
    enum ServerMode: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// Keeps them open (HTTP/1.1 keep-alive).
        case keepAlive
        /// Closes each one right after its answer, without saying so (`--close-after-answer`).
        case closeAfterAnswer
        /// Drops every request that is not the first on its connection, as a server whose idle timeout fires
        /// just as the client reuses the connection (`--drop-reused-connections`).
        case dropReusedConnections

        var arguments: [String] {
            switch self {
            case .keepAlive: []
            case .closeAfterAnswer: ["--close-after-answer"]
            case .dropReusedConnections: ["--drop-reused-connections"]
            }
        }

        var testDescription: String { rawValue }
    }

    func events(_ harness: Harness, _ emulator: String, slot: String) throws -> [[String: Any]] {
        try harness.replenishEvents(emulator).filter { $0["slot"] as? String == slot }
    }

    /// Before the fix, libcurl sent a replenish on the connection the duties had left open; when the server
    /// dropped it unanswered, libcurl sent it again on a fresh connection ("Connection died, retrying a fresh
    /// connect"), unseen by the agent.
    @Test(arguments: ServerMode.allCases)
    func everyLoggedReplenishAttemptIsExactlyOneRequestAtTheServer(mode: ServerMode) throws {
        let harness = Harness()
        let (emulator, config, _, _) = try harness.startPairedAgent(emulatorArguments: mode.arguments)
        // The first attempt is dropped before any work, the second after the work (the order is placed but the
        // agent never hears it), the third gets ORDER_INPROGRESS.
        for kind in ["drop", "dropAfterWork"] {
            try harness.injectFault(emulator, path: "/replenish/slot-1", count: 1, #"{"kind":"\#(kind)"}"#)
        }
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the order after two lost answers", timeout: 60) {
            let slot = try harness.slotStatus(config: config, "slot-1")
            return slot["pending"] as? Bool == false && slot["lastResult"] as? String == "ORDER_INPROGRESS"
        }
        _ = try harness.emulator(emulator, .post, "/admin/deliver/slot-1")
        // A second press without faults, after the agent's connections have sat idle.
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the second order") {
            let slot = try harness.slotStatus(config: config, "slot-1")
            return slot["pending"] as? Bool == false && slot["lastResult"] as? String == "TEST_ORDER_PLACED"
        }

        let received = try events(harness, emulator, slot: "slot-1")
        let logged = harness.loggedReplenishAttempts(slot: "slot-1")
        #expect(
            received.count == logged,
            "the server received \(received.count) replenish requests, the agent logged \(logged)")
        #expect(received.map { $0["outcome"] as? String ?? "" } == ["faulted", "placed", "inProgress", "placed"])
        // Each on a connection of its own.
        let places = received.map { $0["requestOnConnection"] as? Int ?? 0 }
        #expect(places.allSatisfy { $0 == 1 }, "request numbers on their connections: \(places)")
        #expect(Set(received.map { $0["connection"] as? Int ?? 0 }).count == received.count)
        #expect((try harness.stats(emulator)["ordersPlaced"] as? [String: Int])?["slot-1"] == 2)
        harness.expectNoSecretsInAgentOutput()
    }

    /// The client itself: POST and DELETE always open a connection of their own that is closed after the
    /// answer; GETs share one kept-alive connection.
    @Test func postAndDeleteNeverReuseAConnectionAndGetsDo() async throws {
        let harness = Harness()
        let emulator = try harness.startEmulator()
        let client = try CurlHTTPClient(options: .init())
        let methods: [HTTPRequest.Method] = [.get, .get, .post, .post, .delete, .get, .post, .get]
        for method in methods {
            // No token: the emulator refuses each, and logs each with its connection and place on it.
            let answer = try await client.send(HTTPRequest(method: method, url: emulator + "/replenish/slot-1"))
            #expect(answer.status >= 400)
        }
        let received = try harness.replenishEvents(emulator)
        try #require(received.count == methods.count)
        let connections = received.map { $0["connection"] as? Int ?? 0 }
        let places = received.map { $0["requestOnConnection"] as? Int ?? 0 }
        for (index, method) in methods.enumerated() where method != .get {
            #expect(places[index] == 1, "\(method) #\(index) was request \(places[index]) on its connection")
            #expect(connections.filter { $0 == connections[index] }.count == 1, "\(method) #\(index) shared")
        }
        let getConnections = Set(methods.indices.filter { methods[$0] == .get }.map { connections[$0] })
        #expect(getConnections.count == 1, "GETs used connections \(getConnections)")
    }

    /// LWA and DRS each have their own lane: a replenish that the server answers only after 14 s does not hold
    /// back the refresh of 10 s access tokens.
    @Test func aSlowDRSCallNeverDelaysATokenRefresh() throws {
        let harness = Harness()
        let (emulator, config, _, _) = try harness.startPairedAgent(emulatorArguments: [
            "--access-token-lifetime", "10",
        ])
        try harness.injectFault(emulator, path: "/replenish/slot-1", count: 1, #"{"kind":"delay","seconds":14}"#)
        let pressed = Date().timeIntervalSince1970
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the order after the slow call", timeout: 60) {
            let slot = try harness.slotStatus(config: config, "slot-1")
            return slot["pending"] as? Bool == false && slot["lastResult"] as? String == "TEST_ORDER_PLACED"
        }
        let done = Date().timeIntervalSince1970
        let issues = (try harness.stats(emulator)["tokenIssues"] as? [[String: Any]] ?? []).map {
            (at: $0["at"] as? Double ?? 0, expiresAt: $0["expiresAt"] as? Double ?? 0)
        }
        // Every access token was replaced before it expired, from pairing to the end of the slow call.
        for (previous, next) in zip(issues, issues.dropFirst()) {
            #expect(
                next.at < previous.expiresAt,
                "a token expired \(String(format: "%.2f", next.at - previous.expiresAt)) s before its successor")
        }
        #expect((issues.last?.expiresAt ?? 0) > done, "the newest token had expired when the order was done")
        let margins = zip(issues, issues.dropFirst()).map { $0.0.expiresAt - $0.1.at }
        print(
            "lanes: \(issues.count) access tokens, each replaced at least "
                + "\(String(format: "%.2f", margins.min() ?? 0)) s before it expired")
        // The slow call really spanned refreshes.
        #expect(issues.filter { $0.at > pressed && $0.at < done }.count >= 1, "no refresh during the slow call")
        #expect(done - pressed >= 14)
        let received = try events(harness, emulator, slot: "slot-1")
        #expect(received.filter { $0["outcome"] as? String == "placed" }.count == 1)
        #expect(received.count == harness.loggedReplenishAttempts(slot: "slot-1"))
        harness.expectNoSecretsInAgentOutput()
    }

    /// With every proxy variable pointing at a closed port (and no exemptions), the agent still pairs and
    /// orders: it never uses a proxy (through one, the `http://` case would send tokens in clear text).
    @Test func proxyVariablesInTheEnvironmentAreIgnored() throws {
        let harness = Harness()
        let proxy = "http://127.0.0.1:\(try FreePorts.take())"
        var environment = ProcessInfo.processInfo.environment
        for name in ["no_proxy", "NO_PROXY"] { environment[name] = nil }
        for name in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] {
            environment[name] = proxy
        }
        let (emulator, config, _, _) = try harness.startPairedAgent(agentEnvironment: environment)
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the order") {
            (try harness.slotStatus(config: config, "slot-1")["lastResult"] as? String) == "TEST_ORDER_PLACED"
        }
        #expect((try harness.stats(emulator)["ordersPlaced"] as? [String: Int])?["slot-1"] == 1)
        harness.expectNoSecretsInAgentOutput()
    }
}
