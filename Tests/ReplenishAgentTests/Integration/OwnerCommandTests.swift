import Foundation
import Testing

@testable import ReplenishAgent

/// The owner's commands against the emulator, with the daemon running (it does the work, asked over its
/// control socket) and without it (the command does it under the state directory's lock): `orders`,
/// `cancel-test-orders`, `deregister`, and a press while the slot's order is still open.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct OwnerCommandTests {
    private func counter(_ harness: Harness, _ emulator: String, _ name: String) throws -> Int {
        try harness.stats(emulator)[name] as? Int ?? 0
    }

    private func placed(_ harness: Harness, _ emulator: String, _ slot: String = "slot-1") throws -> Int {
        (try harness.stats(emulator)["ordersPlaced"] as? [String: Int])?[slot] ?? 0
    }

    private func newestOrder(_ harness: Harness, config: String) throws -> [String: Any] {
        (try harness.ordersJSON(config: config)["orders"] as? [[String: Any]])?.first ?? [:]
    }

    @Test func aPressWhileTheOrderIsOpenIsRecordedAndCancellingTheTestOrderLetsTheNextPressOrder() throws {
        let harness = Harness()
        let (emulator, config, agent, _) = try harness.startPairedAgent()
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the first order, recorded") {
            try placed(harness, emulator) == 1 && newestOrder(harness, config: config)["open"] as? Bool == true
        }

        // Pressed again while the order is out: DRS is asked about it, and the press is recorded, not sent.
        let infoCalls = try counter(harness, emulator, "orderInfoCalls")
        let again = try harness.run("replenish-agent", ["press", "button", "--config", config])
        #expect(again.status == 0, "\(again.error)")
        #expect(again.output.contains("already ordered"), "\(again.output)")
        #expect(try counter(harness, emulator, "orderInfoCalls") == infoCalls + 1)
        var order = try newestOrder(harness, config: config)
        #expect(order["status"] as? String == "Processing")
        #expect(order["pressesWhileOpen"] as? Int == 1)
        #expect(order["detailCode"] as? String == "TEST_ORDER_PLACED")
        #expect((order["eventInstanceId"] as? String)?.isEmpty == false)
        #expect(try harness.run("replenish-agent", ["orders", "--config", config]).output.contains("pressed 1 more"))
        #expect(try placed(harness, emulator) == 1)
        #expect(harness.loggedReplenishAttempts(slot: "slot-1") == 1)

        // The tester cancels it (the daemon does, over the control socket): the next press orders again.
        let cancel = try harness.run("replenish-agent", ["cancel-test-orders", "--slot", "slot-1", "--config", config])
        #expect(cancel.status == 0, "\(cancel.error)")
        #expect(cancel.output.contains("slot-1: NO_ORDER_IN_PROGRESS"), "\(cancel.output)")
        #expect(try counter(harness, emulator, "cancelTestOrdersCalls") == 1)
        order = try newestOrder(harness, config: config)
        #expect(order["open"] as? Bool == false)
        #expect(order["status"] as? String == "Cancelled")
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the second order") { try placed(harness, emulator) == 2 }

        // Without the daemon, and with DRS rejecting the stored access token: the command refreshes it and
        // cancels all slots itself.
        agent.terminate()
        agent.waitUntilExit()
        _ = try harness.emulator(emulator, .post, "/admin/expire-access-tokens")
        let offline = try harness.run("replenish-agent", ["cancel-test-orders", "--config", config])
        #expect(offline.status == 0, "\(offline.error)")
        #expect(offline.output.contains("test orders cancelled"), "\(offline.output)")
        #expect(try counter(harness, emulator, "cancelTestOrdersCalls") == 3)
        #expect(try newestOrder(harness, config: config)["status"] as? String == "Cancelled")
        // The refreshed tokens were saved: the device is still paired, and the status file still reads.
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == true)
        #expect(
            !(offline.output + offline.error).contains("Atza|") && !(offline.output + offline.error).contains("Atzr|"))
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func cancellingTestOrdersIsRefusedInProductionWithTheReason() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator(["--slots", "slot-1"])
        let config = try harness.writeConfig(emulator: emulator, pairingPort: 1, phase: "production")
        let refused = try harness.run("replenish-agent", ["cancel-test-orders", "--config", config])
        #expect(refused.status == 1)
        #expect(refused.error.contains("production phase"), "\(refused.error)")
        let unknown = try harness.run(
            "replenish-agent",
            [
                "cancel-test-orders", "--slot", "nope", "--config",
                try harness.writeConfig(emulator: emulator, pairingPort: 1),
            ])
        #expect(unknown.status == 1)
        #expect(unknown.error.contains("no button to slot \"nope\""), "\(unknown.error)")
        #expect(try counter(harness, emulator, "cancelTestOrdersCalls") == 0)
    }

    @Test func deregisterWhileDRSIsDownIsQueuedAndRetriedAndPairingOpensAtOnce() throws {
        let harness = Harness()
        let (emulator, config, _, pairingPort) = try harness.startPairedAgent()
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the order") { try placed(harness, emulator) == 1 }
        // DRS fails the next two deregistration calls: the daemon's own try and the queue's first retry.
        try harness.injectFault(emulator, path: "/registration", count: 2, #"{"kind":"status","status":503}"#)
        let result = try harness.run("replenish-agent", ["deregister", "--config", config])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.output.contains("deregistration queued"), "\(result.output)")
        // Local wipe at once: not paired, pairing open again, the order history kept with nothing open.
        let status = try harness.statusJSON(config: config)
        #expect(status["paired"] as? Bool == false)
        #expect((status["slots"] as? [String: [String: Any]])?["slot-1"]?["subscribed"] is NSNull)
        try harness.waitUntil("the pairing endpoints again") { Harness.pairingPortAnswers(pairingPort) }
        let order = try newestOrder(harness, config: config)
        #expect(order["open"] as? Bool == false)
        #expect(order["detailCode"] as? String == "TEST_ORDER_PLACED")
        // The queue retries until DRS takes it (backoff of seconds), then forgets the old token.
        try harness.waitUntil("the queued deregistration") {
            harness.agentLogs.contains("DRS deregistration done")
        }
        #expect((try harness.stats(emulator)["faultsInjected"] as? [String: Int])?["status"] == 2)
        try harness.waitUntil("deregistration.json removed") {
            !FileManager.default.fileExists(atPath: harness.directory + "/state/deregistration.json")
        }
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func deregisterWithoutTheDaemonTriesAtOnceAndElseQueuesItForTheNextStart() throws {
        let harness = Harness()
        let (emulator, config, agent, pairingPort) = try harness.startPairedAgent()
        agent.terminate()
        agent.waitUntilExit()
        // DRS cannot take it now: the command queues it.
        try harness.injectFault(emulator, path: "/registration", count: 1, #"{"kind":"status","status":503}"#)
        let offline = try harness.run("replenish-agent", ["deregister", "--config", config])
        #expect(offline.status == 0, "\(offline.error)")
        #expect(offline.output.contains("deregistration queued"), "\(offline.output)")
        #expect(!FileManager.default.fileExists(atPath: harness.directory + "/state/tokens.json"))
        #expect(FileManager.default.fileExists(atPath: harness.directory + "/state/deregistration.json"))
        // The next start sends it, and serves pairing.
        let restarted = try harness.startAgent(config: config)
        try harness.waitUntil("the queued deregistration") {
            harness.agentLogs.contains("DRS deregistration done")
                && !FileManager.default.fileExists(atPath: harness.directory + "/state/deregistration.json")
        }
        try harness.waitUntil("the pairing endpoints") { Harness.pairingPortAnswers(pairingPort) }

        // Paired again and stopped: now DRS answers, and the command deregisters at once.
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        try harness.waitUntil("paired again") { try harness.statusJSON(config: config)["paired"] as? Bool == true }
        let calls = try counter(harness, emulator, "deregisterCalls")
        restarted.terminate()
        restarted.waitUntilExit()
        let direct = try harness.run("replenish-agent", ["deregister", "--config", config])
        #expect(direct.status == 0, "\(direct.error)")
        #expect(direct.output.contains("deregistered from DRS"), "\(direct.output)")
        #expect(try counter(harness, emulator, "deregisterCalls") == calls + 1)
        #expect(!FileManager.default.fileExists(atPath: harness.directory + "/state/deregistration.json"))
        harness.expectNoSecretsInAgentOutput()
    }
}
