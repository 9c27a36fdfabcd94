import Foundation
import Testing

@testable import ReplenishAgent

/// Factory reset and owner change through the real binaries: with the daemon running (over its control
/// socket) and without it (on the files, the deregistration queued for the next start).
@Suite(.serialized, .onOwnThread, .tags(.process)) struct ResetTests {
    func placed(_ harness: Harness, _ emulator: String) throws -> Int {
        (try harness.stats(emulator)["ordersPlaced"] as? [String: Int])?["slot-1"] ?? 0
    }

    @Test func aResetWhileRunningDeregistersWipesTheQueuedPressAndOpensPairingForTheNextOwner() throws {
        let harness = Harness()
        let (emulator, config, agent, pairingPort) = try harness.startPairedAgent()
        // DRS cannot take the press yet: it stays queued under the first owner's pairing.
        try harness.injectFault(emulator, path: "/replenish", count: 1000, #"{"kind":"status","status":503}"#)
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        #expect(try harness.statusJSON(config: config)["pendingOrders"] as? Int == 1)
        // A moved-aside copy from earlier trouble goes too.
        let aside = harness.directory + "/state/status.json.corrupt-1"
        try "{}".write(toFile: aside, atomically: false, encoding: .utf8)
        chmod(aside, 0o600)

        let reset = try harness.run("replenish-agent", ["reset", "--config", config])
        #expect(reset.status == 0, "\(reset.error)")
        #expect(reset.output.contains("deregistered from DRS"), "\(reset.output)")
        #expect(try harness.stats(emulator)["deregisterCalls"] as? Int == 1)
        let status = try harness.statusJSON(config: config)
        #expect(status["paired"] as? Bool == false)
        #expect(status["pendingOrders"] as? Int == 0)
        for name in ["tokens.json", "outbox.json", "status.json.corrupt-1"] {
            #expect(!FileManager.default.fileExists(atPath: harness.directory + "/state/" + name), "\(name) is left")
        }
        #expect(agent.isRunning)

        // The next owner pairs; DRS is healthy again: the first owner's press is never ordered.
        _ = try harness.emulator(emulator, .delete, "/admin/faults")
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        try harness.waitUntil("the first duties of the new pairing") {
            (try harness.slotStatus(config: config, "slot-1")["subscribed"] as? Bool) == true
        }
        #expect(try harness.statusJSON(config: config)["pendingOrders"] as? Int == 0)
        #expect(try placed(harness, emulator) == 0)
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the new owner's order") { try placed(harness, emulator) == 1 }
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func aResetWithTheAgentStoppedQueuesTheDeregistrationForTheNextStart() throws {
        let harness = Harness()
        let (emulator, config, agent, pairingPort) = try harness.startPairedAgent()
        agent.terminate()
        try harness.waitUntil("the agent to stop") { !agent.isRunning }

        let reset = try harness.run("replenish-agent", ["reset", "--config", config])
        #expect(reset.status == 0, "\(reset.error)")
        #expect(reset.output.contains("deregisters from DRS when it next runs"), "\(reset.output)")
        let state = harness.directory + "/state/"
        #expect(!FileManager.default.fileExists(atPath: state + "tokens.json"))
        #expect(FileManager.default.fileExists(atPath: state + "deregistration.json"))
        #expect(try harness.stats(emulator)["deregisterCalls"] as? Int == 0)

        _ = try harness.startAgent(config: config)
        try harness.waitUntil("the queued deregistration") {
            (try harness.stats(emulator)["deregisterCalls"] as? Int) == 1
                && !FileManager.default.fileExists(atPath: state + "deregistration.json")
        }
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == false)
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == true)
        harness.expectNoSecretsInAgentOutput()
    }
}
