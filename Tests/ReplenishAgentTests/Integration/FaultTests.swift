import Foundation
import Testing

@testable import ReplenishAgent

/// A kitchen's worst days, against the real binaries: lost answers, outages with a SIGKILL in the middle,
/// rejected and revoked tokens, corrupt state files. Every test also checks the agent printed no secret.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct FaultTests {
    func events(_ harness: Harness, _ emulator: String, slot: String) throws -> [[String: Any]] {
        try harness.replenishEvents(emulator).filter { $0["slot"] as? String == slot }
    }

    @Test func lostAnswerEndsAsOneOrderAndTheRetrySeesOrderInProgress() throws {
        let harness = Harness()
        let (emulator, config, agent, _) = try harness.startPairedAgent()
        try harness.injectFault(emulator, path: "/replenish/slot-1", count: 1, #"{"kind":"dropAfterWork"}"#)
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the agent to finish the order") {
            let slot = try harness.slotStatus(config: config, "slot-1")
            return slot["pending"] as? Bool == false && slot["lastResult"] as? String == "ORDER_INPROGRESS"
        }
        let outcomes = try events(harness, emulator, slot: "slot-1").map { $0["outcome"] as? String ?? "" }
        #expect(outcomes == ["placed", "inProgress"])
        #expect((try harness.stats(emulator)["ordersPlaced"] as? [String: Int])?["slot-1"] == 1)
        // The agent stops there (DeliveryPolicy's `.done`, tested on the manual clock): a graceful stop, which
        // finishes whatever is in flight, leaves the two calls.
        try harness.stop(agent)
        #expect(agent.terminationStatus == 0)
        #expect(try events(harness, emulator, slot: "slot-1").count == 2)
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func outageKillAndRestartPlaceTheOrderOnceWithoutASecondPress() throws {
        let harness = Harness()
        let (emulator, config, agent, _) = try harness.startPairedAgent()
        try harness.injectFault(emulator, path: "/replenish", count: 1000, #"{"kind":"status","status":503}"#)
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("two failed attempts") {
            try events(harness, emulator, slot: "slot-1").filter { $0["outcome"] as? String == "faulted" }.count >= 2
        }
        try harness.kill9(agent)
        #expect(try harness.statusJSON(config: config)["pendingOrders"] as? Int == 1)
        let restarted = try harness.startAgent(config: config)
        _ = try harness.emulator(emulator, .delete, "/admin/faults")
        try harness.waitUntil("the order after the outage") {
            let placed = (try harness.stats(emulator)["ordersPlaced"] as? [String: Int])?["slot-1"]
            let pending = try harness.statusJSON(config: config)["pendingOrders"] as? Int
            return placed == 1 && pending == 0
        }
        let placed = try events(harness, emulator, slot: "slot-1").filter { $0["outcome"] as? String == "placed" }
        #expect(placed.count == 1)
        #expect(restarted.isRunning)
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func invalidTokenIsRefreshedOnceAndTheOrderRetried() throws {
        let harness = Harness()
        let (emulator, config, _, _) = try harness.startPairedAgent()
        let grantsBefore = (try harness.stats(emulator)["tokenGrants"] as? [String: Int])?["refresh_token"] ?? 0
        _ = try harness.emulator(emulator, .post, "/admin/expire-access-tokens")
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the order") {
            (try harness.slotStatus(config: config, "slot-1")["lastResult"] as? String) == "TEST_ORDER_PLACED"
        }
        let outcomes = try events(harness, emulator, slot: "slot-1").map { $0["outcome"] as? String ?? "" }
        #expect(outcomes == ["rejected", "placed"])
        let stats = try harness.stats(emulator)
        #expect(stats["invalidTokenAnswers"] as? Int == 1)
        #expect((stats["tokenGrants"] as? [String: Int])?["refresh_token"] == grantsBefore + 1)
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func revokedRefreshTokenReopensPairingParksTheEarlierPressAndDoesNotHammerLWA() throws {
        let harness = Harness()
        let (emulator, config, _, pairingPort) = try harness.startPairedAgent()
        _ = try harness.emulator(emulator, .post, "/admin/revoke-refresh-tokens")
        _ = try harness.emulator(emulator, .post, "/admin/expire-access-tokens")
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("needs-pairing") {
            (try harness.statusJSON(config: config)["tokenState"] as? String) == "needs-pairing"
        }
        let status = try harness.statusJSON(config: config)
        #expect(status["paired"] as? Bool == false)
        #expect(status["pendingOrders"] as? Int == 1)
        try harness.waitUntil("the pairing endpoints again") { Harness.pairingPortAnswers(pairingPort) }
        // From here to the end of the test no refresh is asked for (the revoked token is never sent again):
        // the only token request is the new pairing's code redemption. (That nothing is retried on a
        // schedule is the token manager's rule, tested on the manual clock.)
        let requestsBefore = try harness.stats(emulator)["tokenRequests"] as? Int ?? 0
        // A press now is refused with the reason; the earlier one is still queued.
        let refused = try harness.run("replenish-agent", ["press", "button", "--config", config])
        #expect(refused.status != 0 && refused.error.contains("not paired"))
        // Pairing again (perhaps another owner's account) parks the press made under the revoked pairing: shown,
        // never sent. A new press orders on the new pairing.
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        try harness.waitUntil("the earlier press parked") {
            let status = try harness.statusJSON(config: config)
            return status["pendingOrders"] as? Int == 0 && status["parkedOrders"] as? Int == 1
        }
        #expect(
            (try harness.slotStatus(config: config, "slot-1")["parkedReason"] as? String)?.contains("earlier pairing")
                == true)
        #expect((try harness.stats(emulator)["ordersPlaced"] as? [String: Int])?["slot-1"] == nil)
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the new press ordered") {
            (try harness.stats(emulator)["ordersPlaced"] as? [String: Int])?["slot-1"] == 1
        }
        #expect((try harness.stats(emulator)["tokenRequests"] as? Int ?? 0) - requestsBefore == 1)
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func corruptStateFilesAreMovedAsideAndTheAgentStillStarts() throws {
        let harness = Harness()
        let (emulator, config, agent, pairingPort) = try harness.startPairedAgent()
        try harness.stop(agent, timeout: 30)
        let state = harness.directory + "/state"
        for file in ["outbox.json", "status.json", "tokens.json"] {
            try "{\"version\":1,\"torn".write(toFile: state + "/" + file, atomically: false, encoding: .utf8)
            chmod(state + "/" + file, 0o600)
        }
        _ = try harness.startAgent(config: config)
        // Unpaired again (the token file was unreadable), pairing served, files kept aside for inspection.
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        let names = try FileManager.default.contentsOfDirectory(atPath: state)
        for file in ["outbox.json", "status.json", "tokens.json"] {
            #expect(names.contains { $0.hasPrefix(file + ".corrupt-") }, "\(file)")
        }
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the order") {
            (try harness.slotStatus(config: config, "slot-1")["lastResult"] as? String) == "TEST_ORDER_PLACED"
        }
        #expect(harness.agentLogs.contains("moved to"))
        harness.expectNoSecretsInAgentOutput()
    }
}
