import Foundation
import Testing

@testable import ReplenishAgent

/// `replenish-emulator serve --state-file`: the emulated LWA and DRS outlive a SIGKILL of the emulator (the VM
/// boot test cuts the power of the VM the emulator runs in), so a paired agent stays paired and the event log
/// still counts the orders placed before.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct EmulatorStateFileTests {
    /// Starts `serve` on a fixed port, with or without the state file, and waits until it answers.
    func serve(_ harness: Harness, port: String, stateFile: String?, log: String) throws -> Process {
        let process = try harness.start(
            "replenish-emulator",
            ["serve", "--listen", "127.0.0.1:\(port)", "--slots", "slot-1"]
                + (stateFile.map { ["--state-file", $0] } ?? []), log: log)
        try harness.waitUntil("the emulator on port \(port)") {
            (try? harness.stats("http://127.0.0.1:\(port)")) != nil
        }
        return process
    }

    func placed(_ harness: Harness, _ emulator: String) throws -> Int {
        try harness.replenishEvents(emulator).filter { $0["outcome"] as? String == "placed" }.count
    }

    func pressAndWaitForTheOrder(_ harness: Harness, _ emulator: String, config: String, placedBefore: Int) throws {
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the order") {
            try placed(harness, emulator) == placedBefore + 1
                && harness.statusJSON(config: config)["pendingOrders"] as? Int == 0
        }
    }

    @Test(arguments: [true, false]) func tokensOrdersAndEventsSurviveAKilledEmulator(keepState: Bool) throws {
        let harness = Harness()
        let stateFile = keepState ? harness.directory + "/emulator-state.json" : nil
        let port = String(try FreePorts.take())
        let emulator = "http://127.0.0.1:\(port)"
        let first = try serve(harness, port: port, stateFile: stateFile, log: "emulator-1.log")
        let pairingPort = try FreePorts.take()
        let config = try harness.writeConfig(emulator: emulator, pairingPort: pairingPort)
        _ = try harness.startAgent(config: config)
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        try pressAndWaitForTheOrder(harness, emulator, config: config, placedBefore: 0)
        let lastSeq = try harness.emulator(emulator, .get, "/admin/events")["lastSeq"] as? Int ?? -1

        try harness.kill9(first)
        _ = try serve(harness, port: port, stateFile: stateFile, log: "emulator-2.log")
        let events = try harness.emulator(emulator, .get, "/admin/events")
        if !keepState {
            // Without the file the emulator forgets: the control that shows the other case can fail.
            #expect(try placed(harness, emulator) == 0)
            #expect(events["lastSeq"] as? Int == 0)
            return
        }
        #expect(try placed(harness, emulator) == 1)
        #expect(events["lastSeq"] as? Int == lastSeq)
        // The order in progress was kept too: the delivery ends it, and the agent's kept tokens place the next.
        let delivered = try harness.emulator(emulator, .post, "/admin/deliver/slot-1")["delivered"] as? [String]
        #expect(delivered?.count == 1)
        try pressAndWaitForTheOrder(harness, emulator, config: config, placedBefore: 1)
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == true)
        let tokenErrors = try harness.stats(emulator)["tokenErrors"] as? [String: Int] ?? [:]
        #expect(tokenErrors.isEmpty)
        harness.expectNoSecretsInAgentOutput()
    }
}
