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
        try harness.stop(agent, timeout: 30)

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

    /// A reset (or `deregister`) killed right after it removed `tokens.json`: the state it leaves is made by hand
    /// (the deregistration queued with the pairing's refresh token and the wipe's mark written, as the reset does
    /// before the first file goes; the tokens gone; the first owner's press and status still there). The next
    /// start finishes the wipe before anything else, and DRS is still told.
    @Test(arguments: ["everything", "pairing"])
    func aResetKilledAfterTheTokensWentIsFinishedAtTheNextStart(scope: String) throws {
        let harness = Harness()
        let (emulator, config, agent, _) = try harness.startPairedAgent()
        try harness.injectFault(emulator, path: "/replenish", count: 1000, #"{"kind":"status","status":503}"#)
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        #expect(try harness.statusJSON(config: config)["pendingOrders"] as? Int == 1)
        try harness.stop(agent, timeout: 30)

        let state = harness.directory + "/state/"
        let tokens =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: state + "tokens.json")))
            as? [String: Any] ?? [:]
        let pending: [String: Any] = [
            "version": 1, "refreshToken": tokens["refreshToken"] ?? "", "clientId": tokens["clientId"] ?? "",
        ]
        try JSONSerialization.data(withJSONObject: pending).write(
            to: URL(fileURLWithPath: state + "deregistration.json"))
        try #"{"scope":"\#(scope)","version":1}"#.write(toFile: state + "wipe.json", atomically: false, encoding: .utf8)
        for name in ["deregistration.json", "wipe.json"] { chmod(state + name, 0o600) }
        try FileManager.default.removeItem(atPath: state + "tokens.json")

        _ = try harness.startAgent(config: config)
        try harness.waitUntil("the queued deregistration") {
            (try harness.stats(emulator)["deregisterCalls"] as? Int) == 1
                && !FileManager.default.fileExists(atPath: state + "deregistration.json")
        }
        let status = try harness.statusJSON(config: config)
        #expect(status["paired"] as? Bool == false)
        #expect(status["pendingOrders"] as? Int == 0, "the first owner's press is left queued")
        // A deregistration keeps the order history (in outbox.json) for the owner to read.
        for name in ["wipe.json"] + (scope == "pairing" ? [] : ["outbox.json"]) {
            #expect(!FileManager.default.fileExists(atPath: state + name), "\(name) is left")
        }
        harness.expectNoSecretsInAgentOutput()
    }
}
