import Foundation
import Testing

@testable import ReplenishAgent

/// The real binaries as processes: pair through the companion flow, press, order placed with the exact
/// headers, a short token lifetime refreshed, and no secret in the agent's output.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct EndToEndTests {
    @Test func pairPressOrderAndRefreshWithoutLeakingSecrets() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator(["--access-token-lifetime", "10", "--slots", "slot-1,slot-2"])
        let pairingPort = try FreePorts.take()
        let config = try harness.writeConfig(emulator: emulator, pairingPort: pairingPort, slots: ["slot-1", "slot-2"])
        #expect(try harness.run("replenish-agent", ["check-config", "--config", config]).status == 0)
        let agent = try harness.startAgent(config: config)

        // Not paired yet: a press is refused with the reason, and status says so.
        try harness.waitForControlSocket()
        let early = try harness.run("replenish-agent", ["press", "button", "--config", config])
        #expect(early.status != 0)
        #expect(early.error.contains("not paired"))
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == false)

        // Pair as the companion app would.
        let companion = try harness.pair(emulator: emulator, pairingPort: pairingPort)
        #expect(companion.output.contains("paired"))
        let paired = try harness.statusJSON(config: config)
        #expect(paired["paired"] as? Bool == true)
        // Once paired, the pairing endpoints are gone.
        try harness.waitUntil("the pairing port to close") {
            (try? CurlEasy(options: .init()).perform(
                HTTPRequest(method: .get, url: "http://127.0.0.1:\(pairingPort)/provision/deviceInfo")))?.status != 200
        }

        // Duties: device status within 30 s of pairing, subscriptions known.
        try harness.waitUntil("device status") {
            (try harness.emulator(emulator, .get, "/admin/stats")["deviceStatusCalls"] as? Int ?? 0) >= 1
        }
        try harness.waitUntil("subscriptions") {
            let slots = try harness.statusJSON(config: config)["slots"] as? [String: [String: Any]]
            return slots?["slot-1"]?["subscribed"] as? Bool == true
        }

        // Press: exits 0 once durable; the order is placed with the exact headers.
        let press = try harness.run("replenish-agent", ["press", "button", "--config", config])
        #expect(press.status == 0, "\(press.error)")
        try harness.waitUntil("the order") {
            let placed = try harness.emulator(emulator, .get, "/admin/stats")["ordersPlaced"] as? [String: Int]
            return placed?["slot-1"] == 1
        }
        let stats = try harness.emulator(emulator, .get, "/admin/stats")
        let headers = try #require(stats["lastReplenishHeaders"] as? [String: String])
        #expect(headers["x-amzn-type-version"] == "com.amazon.dash.replenishment.DrsReplenishInput@1.0")
        #expect(headers["x-amzn-accept-type"] == "com.amazon.dash.replenishment.DrsReplenishResult@1.0")
        let authorization = try #require(headers["authorization"])
        #expect(authorization.hasPrefix("Bearer Atza|"))
        #expect((stats["rejected"] as? [Any])?.isEmpty == true, "\(stats["rejected"] ?? "")")
        try harness.waitUntil("the result in status") {
            let slots = try harness.statusJSON(config: config)["slots"] as? [String: [String: Any]]
            return slots?["slot-1"]?["lastResult"] as? String == "TEST_ORDER_PLACED"
        }
        #expect(try harness.statusJSON(config: config)["pendingOrders"] as? Int == 0)

        // A 10 s token is refreshed on schedule, before it expires, and DRS takes the new one.
        try harness.waitUntil("a scheduled refresh", timeout: 25) {
            let grants = try harness.emulator(emulator, .get, "/admin/stats")["tokenGrants"] as? [String: Int]
            return (grants?["refresh_token"] ?? 0) >= 1
        }
        _ = try harness.emulator(emulator, .post, "/admin/deliver/slot-1")
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the second order") {
            (try harness.emulator(emulator, .get, "/admin/stats")["ordersPlaced"] as? [String: Int])?["slot-1"] == 2
        }
        let after = try harness.emulator(emulator, .get, "/admin/stats")
        let secondAuthorization = (after["lastReplenishHeaders"] as? [String: String])?["authorization"]
        #expect(secondAuthorization != authorization)
        #expect(after["invalidTokenAnswers"] as? Int == 0)

        // State on disk is private.
        var info = stat()
        stat(harness.directory + "/state", &info)
        #expect(info.st_mode & 0o777 == 0o700)
        stat(harness.directory + "/state/tokens.json", &info)
        #expect(info.st_mode & 0o777 == 0o600)

        // SIGTERM stops the agent cleanly.
        try harness.stop(agent)
        #expect(agent.terminationStatus == 0)

        // No token (nor any LWA token-shaped string) in anything the agent printed.
        let tokens = try #require(try FileTokenStore.peek(stateDirectory: harness.directory + "/state"))
        let outputs =
            harness.agentLogs + press.output + press.error + early.error
            + (try harness.run("replenish-agent", ["status", "--config", config]).output)
            + (try harness.run("replenish-agent", ["status", "--json", "--config", config]).output)
        for secret in [
            tokens.accessToken.value, tokens.refreshToken.value, String(authorization.dropFirst(7)), "Atza|", "Atzr|",
        ] {
            let leaked = outputs.contains(secret)  // a Bool, so that a failure does not print the token
            #expect(!leaked, "a token reached the agent's output")
        }
        #expect(harness.agentLogs.contains("order acknowledged"))
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func httpClientVerifiesTLSWithTheGivenCAAndRefusesWithoutIt() throws {
        let harness = Harness()
        let tlsDirectory = harness.directory + "/tls"
        let made = try harness.run("replenish-emulator", ["make-ca", "--dir", tlsDirectory])
        #expect(made.status == 0, "\(made.error)")
        let emulator = try harness.startEmulator(tls: tlsDirectory)
        let url = emulator + "/admin/stats"
        let verified = try CurlEasy(options: .init(caFile: tlsDirectory + "/ca.pem")).perform(
            HTTPRequest(method: .get, url: url))
        #expect(verified.status == 200)
        #expect(verified.header("content-type") == "application/json")
        // Without the throwaway CA, the system store does not trust the server: refused.
        #expect(throws: AgentError.self) {
            try CurlEasy(options: .init()).perform(HTTPRequest(method: .get, url: url))
        }
        do {
            _ = try CurlEasy(options: .init()).perform(HTTPRequest(method: .get, url: url))
        } catch {
            #expect(error.code == .network)
            #expect(error.curl?.code == CurlError.peerFailedVerification)  // 60
        }
    }

    @Test func responseSizeCapAndConnectionReuse() async throws {
        let harness = Harness()
        let emulator = try harness.startEmulator()
        let client = try CurlHTTPClient(options: .init(maximumResponseBytes: 64))
        // The stats answer is larger than 64 bytes: refused, not truncated.
        await #expect(throws: AgentError.self) {
            try await client.send(HTTPRequest(method: .get, url: emulator + "/admin/stats"))
        }
        // One client keeps one connection: three requests, and the emulator accepted no new connection
        // after the first.
        let roomy = try CurlHTTPClient(options: .init())
        var accepted: [Int] = []
        for _ in 0..<3 {
            let answer = try await roomy.send(HTTPRequest(method: .get, url: emulator + "/admin/stats"))
            #expect(answer.status == 200)
            let stats = try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any]
            accepted.append(try #require(stats?["connectionsAccepted"] as? Int))
        }
        #expect(accepted.count == 3 && Set(accepted).count == 1, "connections accepted: \(accepted)")
    }

    @Test func agentPairsAndOrdersOverHTTPSOnlyWithTheConfiguredCA() throws {
        let harness = Harness()
        let tls = harness.directory + "/tls"
        let made = try harness.run("replenish-emulator", ["make-ca", "--dir", tls])
        #expect(made.status == 0, "\(made.error)")
        let ca = tls + "/ca.pem"
        let emulator = try harness.startEmulator(["--slots", "slot-1"], tls: tls)
        let pairingPort = try FreePorts.take()

        // Without tls.caFile the agent does not trust the emulator: redeeming the code fails (502), unpaired.
        let untrusting = try harness.startAgent(
            config: try harness.writeConfig(emulator: emulator, pairingPort: pairingPort))
        try harness.waitUntil("the pairing endpoints") { Harness.pairingPortAnswers(pairingPort) }
        let refused = try harness.run(
            "replenish-emulator",
            [
                "companion", "--device", "http://127.0.0.1:\(pairingPort)", "--lwa", harness.plainURL(emulator),
            ])
        #expect(refused.status != 0)
        #expect(refused.error.contains("502") && refused.error.contains("LWA_ERROR"), "\(refused.error)")
        try harness.stop(untrusting)

        // With it, the whole path runs over HTTPS: pairing, the duties, one press, one order.
        let config = try harness.writeConfig(emulator: emulator, pairingPort: pairingPort, caFile: ca)
        _ = try harness.startAgent(config: config)
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        let press = try harness.run("replenish-agent", ["press", "button", "--config", config])
        #expect(press.status == 0, "\(press.error)")
        try harness.waitUntil("the order over HTTPS") {
            (try harness.slotStatus(config: config, "slot-1")["lastResult"] as? String) == "TEST_ORDER_PLACED"
        }
        let stats = try harness.emulator(emulator, .get, "/admin/stats", caFile: ca)
        #expect((stats["ordersPlaced"] as? [String: Int])?["slot-1"] == 1)
        #expect((stats["deviceStatusCalls"] as? Int ?? 0) >= 1)
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func checkConfigExitsOneWithEveryProblem() throws {
        let harness = Harness()
        let path = harness.directory + "/bad.json"
        try #"{"device":{"serial":"bad serial","model":"m","phase":"beta"},"extra":1}"#.write(
            toFile: path, atomically: true, encoding: .utf8)
        let result = try harness.run("replenish-agent", ["check-config", "--config", path])
        #expect(result.status == 1)
        let lines = result.error.split(separator: "\n")
        #expect(
            lines.contains(
                "device.serial: must be 1 to 50 characters of A-Z a-z 0-9 (the DRS integration guide's rule)"))
        #expect(lines.contains { $0.hasPrefix("device.phase:") })
        #expect(lines.contains("extra: unknown key"))
        #expect(lines.contains("lwa: is required"))
        #expect(
            try harness.run("replenish-agent", ["check-config", "--config", harness.directory + "/none.json"]).status
                == 1)
    }
}
