import Foundation
import Testing

@testable import ReplenishAgent

/// Whether the cloud end-to-end suite can run here (scripts/cloud-test.sh sets both).
private let cloudEndToEndConfigured =
    ProcessInfo.processInfo.environment["REPLENISH_CLOUD_BINARY"] != nil
    && ProcessInfo.processInfo.environment["REPLENISH_CLOUD_TEST_DATABASE"] != nil

/// The whole chain of program alexa, offline: the agent on the simulated board → nginx (mutual TLS with the
/// unit's certificate) → two copies of `replenish-cloud` behind one PostgreSQL database → the emulator's Alexa
/// event gateway and LWA. A press becomes exactly one `InventoryConsumed` and a level one `ChangeReport`, across
/// a lost acknowledgement, a restart of a copy, an expired grant token and a throttled gateway.
///
/// It needs the cloud's binary and a database server: scripts/cloud-test.sh runs it with both
/// (`REPLENISH_CLOUD_BINARY`, `REPLENISH_CLOUD_TEST_DATABASE`) and fails unless it ran and passed; elsewhere it
/// is skipped.
@Suite(.tags(.process), .serialized, .enabled(if: cloudEndToEndConfigured)) struct CloudEndToEndTests {
    static let environment = ProcessInfo.processInfo.environment
    static let customer = "amzn1.account.E2E"

    /// The catalogue the cloud describes the unit with: the agent config's two slots (AlexaProgramTests).
    static let catalogue = """
        {"manufacturer": "Example Appliances", "models": {"coffee-1": {"friendlyName": "Coffee maker",
         "description": "A coffee maker", "slots": [
          {"slot": "pods", "sensor": "usage", "measurement": {"@type": "Count"},
           "dashReplenishmentId": "drid-pods", "name": "Coffee pods"},
          {"slot": "tank", "sensor": "level", "measurement": {"@type": "Percentage"},
           "dashReplenishmentId": "drid-tank", "name": "Water filter"}]}}}
        """

    /// The chain's parts a test drives.
    struct Chain {
        var emulator: String
        var copies: [(port: Int, arguments: [String], environment: [String: String])]
        var processes: [Process]
        var cloud: AlexaProgramTests.Cloud
        /// While this file exists, nginx loses every report's answer: the report reaches a copy (a mirrored
        /// request), the unit gets a 502 instead of the acknowledgement.
        var loseAnswers: String
    }

    static func psql(_ harness: Harness, _ url: String, _ sql: String) throws {
        let result = try harness.run("/usr/bin/psql", [url, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql])
        guard result.status == 0 else { throw AgentError(.server, "psql: \(result.error)") }
    }

    static func startChain(_ harness: Harness) throws -> Chain {
        let binary = try #require(environment["REPLENISH_CLOUD_BINARY"])
        let server = try #require(environment["REPLENISH_CLOUD_TEST_DATABASE"])
        let directory = harness.directory + "/cloud"
        try FileManager.default.createDirectory(atPath: directory + "/nginx", withIntermediateDirectories: true)
        let made = try harness.run("replenish-emulator", ["make-ca", "--dir", directory + "/tls"])
        guard made.status == 0 else { throw AgentError(.server, "make-ca: \(made.error)") }
        try AlexaProgramTests.makeUnitCertificate(harness, directory: directory, name: "unit", unit: "TEST0001")
        let emulator = try harness.startEmulator()

        // The database, the catalogue and the factory's registration of the unit with its label's key.
        let name = "e2e_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try psql(harness, server, "CREATE DATABASE \(name)")
        var database = try #require(URLComponents(string: server))
        database.path = "/" + name
        let databaseURL = try #require(database.string)
        try catalogue.write(toFile: directory + "/catalogue.json", atomically: true, encoding: .utf8)
        let key = try harness.writeSetupKey()
        let keyHex = try String(contentsOfFile: key, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        try "TEST0001 \(keyHex) coffee-1\n".write(toFile: directory + "/units.txt", atomically: true, encoding: .utf8)
        let register = try harness.run(
            binary,
            [
                "register", directory + "/units.txt", "--database", databaseURL, "--catalogue",
                directory + "/catalogue.json",
            ])
        guard register.status == 0 else { throw AgentError(.server, "register: \(register.error)") }

        // Two copies, their own schedule every second, LWA and the gateway on the emulator.
        let plain = harness.plainURL(emulator)
        var copies: [(port: Int, arguments: [String], environment: [String: String])] = []
        var processes: [Process] = []
        for index in 0..<2 {
            let port = try FreePorts.take()
            let arguments = [
                "serve", "--port", "\(port)", "--database", databaseURL, "--catalogue", directory + "/catalogue.json",
                "--gateway", plain + "/v3/events", "--lwa-token-url", plain + "/auth/o2/token",
                "--lwa-profile-url", plain + "/user/profile", "--send-interval", "1",
            ]
            var environment = ProcessInfo.processInfo.environment
            environment["REPLENISH_CLOUD_CLIENT_ID"] = "skill-client"
            environment["REPLENISH_CLOUD_CLIENT_SECRET"] = "skill-secret"
            copies.append((port, arguments, environment))
            processes.append(try harness.start(binary, arguments, log: "cloud-\(index).log", environment: environment))
        }
        for copy in copies {
            try harness.waitUntil("copy on port \(copy.port) ready", timeout: 60) {
                (try? CurlEasy(options: .init()).perform(
                    HTTPRequest(method: .get, url: "http://127.0.0.1:\(copy.port)/health")))?
                    .status == 200
            }
        }

        // nginx: mutual TLS, the subject passed on, the copies as one upstream; the lost-answers switch.
        let nginx = directory + "/nginx"
        let loseAnswers = directory + "/lose-answers"
        let port = try FreePorts.take()
        let conf = """
            \(AlexaProgramTests.nginxPrelude(nginx))
              upstream clouds {
                server 127.0.0.1:\(copies[0].port) max_fails=0;
                server 127.0.0.1:\(copies[1].port) max_fails=0;
              }
              server {
                \(AlexaProgramTests.nginxMutualTLS(port: port, directory: directory))
                proxy_next_upstream error timeout http_502;
                proxy_set_header X-Amzn-Mtls-Clientcert-Subject $ssl_client_s_dn;
                location / {
                  set $target http://clouds;
                  if (-f \(loseAnswers)) { set $target http://127.0.0.1:1; }
                  mirror /lost-answer;
                  proxy_pass $target;
                }
                location = /lost-answer {
                  internal;
                  set $mirror http://127.0.0.1:1;
                  if (-f \(loseAnswers)) { set $mirror http://clouds; }
                  proxy_pass $mirror$request_uri;
                }
              }
            }
            """
        try conf.write(toFile: nginx + "/nginx.conf", atomically: true, encoding: .utf8)
        processes.append(
            try harness.start(
                "/usr/sbin/nginx", ["-p", nginx, "-c", nginx + "/nginx.conf", "-e", nginx + "/error.log"],
                log: "nginx.log"))
        let cloud = AlexaProgramTests.Cloud(url: "https://127.0.0.1:\(port)", emulator: emulator, directory: directory)
        try harness.waitUntil("nginx in front of the copies") {
            (try? CurlEasy(
                options: .init(
                    caFile: directory + "/tls/ca.pem", clientCertificateFile: cloud.unitCertificate,
                    clientKeyFile: cloud.unitKey)
            ).perform(HTTPRequest(method: .get, url: cloud.url + "/v1/units/TEST0001")))?.status == 200
        }
        return Chain(emulator: emulator, copies: copies, processes: processes, cloud: cloud, loseAnswers: loseAnswers)
    }

    /// The customer links the skill (LWA's account-linking token) and Alexa sends the copy AcceptGrant with a
    /// grant's code, as it does when the customer enables the skill.
    static func acceptGrant(_ harness: Harness, _ chain: Chain) throws {
        let link = try harness.emulator(
            chain.emulator, .post, "/admin/skill/link", body: #"{"customer":"\#(customer)"}"#)
        let grant = try harness.emulator(
            chain.emulator, .post, "/admin/skill/grant", body: #"{"customer":"\#(customer)"}"#)
        let token = try #require(link["token"] as? String)
        let code = try #require(grant["code"] as? String)
        let directive = """
            {"directive": {"header": {"namespace": "Alexa.Authorization", "name": "AcceptGrant", "messageId": "m-1",
             "payloadVersion": "3"}, "payload": {"grant": {"type": "OAuth2.AuthorizationCode", "code": "\(code)"},
             "grantee": {"type": "BearerToken", "token": "\(token)"}}}}
            """
        let answer = try harness.emulator("http://127.0.0.1:\(chain.copies[0].port)", .post, "/events", body: directive)
        let name = ((answer["event"] as? [String: Any])?["header"] as? [String: Any])?["name"] as? String
        #expect(name == "AcceptGrant.Response", "\(answer)")
    }

    /// What the gateway accepted, by event name.
    static func accepted(_ harness: Harness, _ chain: Chain, _ name: String) throws -> [[String: Any]] {
        let events = try harness.emulator(chain.emulator, .get, "/admin/gateway")["accepted"] as? [[String: Any]] ?? []
        return events.filter { event in
            ((event["event"] as? [String: Any])?["header"] as? [String: Any])?["name"] as? String == name
        }
    }

    static func usages(_ events: [[String: Any]]) -> [Double] {
        events.compactMap {
            (((($0["event"] as? [String: Any])?["payload"] as? [String: Any])?["usage"] as? [String: Any])?["value"]
                as? Double)
        }
    }

    static func settled(_ harness: Harness, config: String) throws -> Bool {
        let status = try AlexaProgramTests.alexaStatus(harness, config: config)
        return status["reportInFlight"] is NSNull
            && (status["cloud"] as? String)?.contains("every report acknowledged") == true
    }

    @Test func aPressIsOneInventoryConsumedAcrossLostAnswersARestartAnExpiredTokenAndThrottling() throws {
        let harness = Harness()
        var chain = try Self.startChain(harness)
        try Self.acceptGrant(harness, chain)
        let claim = try harness.run(
            "replenish-companion",
            [
                "claim", "--setup", try #require(harness.setupPayload), "--cloud",
                "http://127.0.0.1:\(chain.copies[1].port)", "--customer", Self.customer,
            ])
        #expect(claim.status == 0, "\(claim.error)")
        try harness.waitUntil("the claimed unit told to Alexa") {
            try !Self.accepted(harness, chain, "AddOrUpdateReport").isEmpty
        }
        let config = try AlexaProgramTests.writeConfig(harness, cloud: chain.cloud)
        try harness.startAgent(config: config)
        try harness.waitForControlSocket()

        // 1. A press: one InventoryConsumed of the press's 2 units.
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the first InventoryConsumed") {
            try Self.usages(Self.accepted(harness, chain, "InventoryConsumed")) == [2]
        }
        try harness.waitUntil("the first press acknowledged") { try Self.settled(harness, config: config) }

        // 2. A lost acknowledgement: the report is applied, the unit never hears so and sends it again.
        _ = FileManager.default.createFile(atPath: chain.loseAnswers, contents: nil)
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the second press applied, its answer lost", timeout: 60) {
            try Self.usages(Self.accepted(harness, chain, "InventoryConsumed")).count == 2
                && !(try Self.settled(harness, config: config))
        }
        unlink(chain.loseAnswers)
        try harness.waitUntil("the resent report acknowledged", timeout: 60) {
            try Self.settled(harness, config: config)
        }
        #expect(harness.agentLogs.contains("the cloud answered 502"), "the unit never lost an answer")

        // 3. A restart of one copy while the unit presses: the other copy answers; the first comes back.
        try harness.stop(chain.processes[0])
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the third press through the other copy", timeout: 60) {
            try Self.usages(Self.accepted(harness, chain, "InventoryConsumed")).count == 3
        }
        let restarted = chain.copies[0]
        chain.processes[0] = try harness.start(
            try #require(Self.environment["REPLENISH_CLOUD_BINARY"]), restarted.arguments, log: "cloud-0-again.log",
            environment: restarted.environment)
        try harness.waitUntil("the copy back", timeout: 60) {
            (try? CurlEasy(options: .init()).perform(
                HTTPRequest(method: .get, url: "http://127.0.0.1:\(restarted.port)/health")))?
                .status == 200
        }

        // 4. The grant's access token expires: the gateway refuses it, the copy refreshes it and sends again.
        _ = try harness.emulator(chain.emulator, .post, "/admin/skill/expire-tokens")
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the fourth press after the token's refresh", timeout: 60) {
            try Self.usages(Self.accepted(harness, chain, "InventoryConsumed")).count == 4
        }

        // 5. A throttled gateway: 429 twice, then the level's ChangeReport goes through.
        try harness.injectFault(
            chain.emulator, path: "/v3/events", count: 2, #"{"kind":"status","status":429,"retryAfter":"1"}"#)
        #expect(try harness.run("replenish-agent", ["level", "tank", "low", "--config", config]).status == 0)
        try harness.waitUntil("the level's ChangeReport through the throttling", timeout: 60) {
            try Self.accepted(harness, chain, "ChangeReport").contains { event in
                let change = ((event["event"] as? [String: Any])?["payload"] as? [String: Any])?["change"]
                let properties = (change as? [String: Any])?["properties"] as? [[String: Any]] ?? []
                return properties.contains { ($0["value"] as? [String: Any])?["value"] as? Double == 10 }
            }
        }
        try harness.waitUntil("everything acknowledged") { try Self.settled(harness, config: config) }
        let faults = try harness.stats(chain.emulator)["faultsInjected"] as? [String: Double]
        #expect(faults?["status"] == 2, "the gateway was not throttled: \(faults ?? [:])")

        // Four presses, four InventoryConsumed of 2 units each, each message delivered once; the refusals are
        // the expired token's and nothing else.
        #expect(try Self.usages(Self.accepted(harness, chain, "InventoryConsumed")) == [2, 2, 2, 2])
        let gateway = try harness.emulator(chain.emulator, .get, "/admin/gateway")
        let deliveries = gateway["deliveries"] as? [String: Double] ?? [:]
        #expect(!deliveries.isEmpty && deliveries.values.allSatisfy { $0 == 1 }, "\(deliveries)")
        let refusals = (gateway["refusals"] as? [[String: Any]] ?? []).compactMap { $0["code"] as? String }
        #expect(Set(refusals) == ["INVALID_ACCESS_TOKEN_EXCEPTION"], "\(refusals)")
        // The events the gateway took, for scripts/alexa-schema-check.py's check against Amazon's schema.
        if let folder = Self.environment["REPLENISH_CLOUD_TEST_MESSAGES"] {
            for (index, event) in (gateway["accepted"] as? [[String: Any]] ?? []).enumerated() {
                let data = try JSONSerialization.data(withJSONObject: event)
                let name =
                    ((event["event"] as? [String: Any])?["header"] as? [String: Any])?["name"] as? String ?? "event"
                _ = FileManager.default.createFile(atPath: "\(folder)/e2e-\(index)-\(name).json", contents: data)
            }
        }
        harness.expectNoSecretsInAgentOutput()
    }
}
