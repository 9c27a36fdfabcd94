import Foundation
import Testing

@testable import ReplenishAgent

/// The simulated board's parity with hardware, through the real binary: bounce bursts, cooldown, long-press
/// re-pairing, a level sensor that orders and reports slot status, and the LED patterns.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct SimulatedBoardTests {
    func led(_ harness: Harness, _ config: String) throws -> String {
        let state = harness.directory + "/state/control.sock"
        let response = try CurlEasy(options: .init(unixSocketPath: state)).perform(
            HTTPRequest(method: .get, url: "http://localhost/state"))
        return
            ((try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])?["ledPattern"] as? String)
            ?? ""
    }

    /// A copy of the simulated board with short long-press and sensor times, so the tests run quickly. The sensor's
    /// full must last 4 s to be a refill: the flapping below (a `level` command per change) stays well under it on
    /// a machine busy with other builds, where a command's start took over 1.5 s.
    func fastBoard(_ harness: Harness) throws -> String {
        let path = harness.directory + "/fast-board.json"
        try """
        {"name":"fast simulated board","backend":"simulated","inputs":[
          {"name":"button","kind":"button","debounceMs":30,"longPressMs":1000},
          {"name":"tank","kind":"level","minActiveMs":500,"minInactiveMs":4000}],
         "outputs":[{"name":"led"}]}
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func bouncesCooldownLongPressRepairingSensorAndLED() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator(["--slots", "slot-1,slot-9"])
        let pairingPort = try FreePorts.take()
        let config = try harness.writeConfig(
            emulator: emulator, pairingPort: pairingPort, cooldownSeconds: 600,
            tankSlot: "slot-9", board: try fastBoard(harness))
        _ = try harness.startAgent(config: config)
        try harness.waitForControlSocket()
        #expect(try led(harness, config) == "pairingMode")
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        try harness.waitUntil("LED off when paired and idle") { try led(harness, config) == "off" }

        // A bouncing press is one order.
        let bouncy = try harness.run("replenish-agent", ["press", "button", "--bounce", "8", "--config", config])
        #expect(bouncy.status == 0, "\(bouncy.error)")
        try harness.waitUntil("the order") {
            (try harness.slotStatus(config: config, "slot-1")["lastResult"] as? String) == "TEST_ORDER_PLACED"
        }
        #expect((try harness.stats(emulator)["replenishCalls"] as? [String: Int])?["slot-1"] == 1)
        try harness.waitUntil("LED solid for the placed order") { try led(harness, config) == "orderPlaced" }

        // Within the cooldown a press is acknowledged, not re-ordered.
        let again = try harness.run("replenish-agent", ["press", "button", "--config", config])
        #expect(again.status == 0 && again.output.contains("cooldown"))
        // The press command returns after the agent decided; a cooldown press never reaches the outbox.
        #expect(try harness.statusJSON(config: config)["pendingOrders"] as? Int == 0)
        #expect((try harness.stats(emulator)["replenishCalls"] as? [String: Int])?["slot-1"] == 1)

        // The level sensor: staying low orders and reports. (A wave shorter than the minimum time is nothing:
        // `LevelSensor`'s rule, tested on the manual clock.)
        #expect(try harness.run("replenish-agent", ["level", "tank", "low", "--config", config]).status == 0)
        try harness.waitUntil("the sensor's order and slot status") {
            let stats = try harness.stats(emulator)
            return (stats["ordersPlaced"] as? [String: Int])?["slot-9"] == 1
                && (stats["slotStatusCalls"] as? Int ?? 0) == 1
        }
        // Flapping after it counted is not a stream of orders (checked at the end, seconds later).
        for level in ["full", "low", "full", "low"] {
            #expect(try harness.run("replenish-agent", ["level", "tank", level, "--config", config]).status == 0)
        }

        // Long press arms re-pairing, a second confirms: deregistered, pairing mode again.
        let arm = try harness.run("replenish-agent", ["press", "button", "--hold", "1.2", "--config", config])
        #expect(arm.status == 0 && arm.output.contains("re-pairing armed"), "\(arm.error)")
        #expect(try led(harness, config) == "confirmRepairing")
        let confirm = try harness.run("replenish-agent", ["press", "button", "--hold", "1.2", "--config", config])
        #expect(confirm.status == 0 && confirm.output.contains("pairing mode"), "\(confirm.error)")
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == false)
        #expect(try harness.stats(emulator)["deregisterCalls"] as? Int == 1)
        try harness.waitUntil("LED pairing mode") { try led(harness, config) == "pairingMode" }
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == true)
        #expect((try harness.stats(emulator)["replenishCalls"] as? [String: Int])?["slot-9"] == 1)
        harness.expectNoSecretsInAgentOutput()
    }

    /// The control socket's `/state`: the LED, each input's settled level, the simulated presses in flight.
    func boardState(_ harness: Harness) throws -> [String: Any] {
        let response = try CurlEasy(options: .init(unixSocketPath: harness.directory + "/state/control.sock"))
            .perform(HTTPRequest(method: .get, url: "http://localhost/state"))
        return try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] ?? [:]
    }

    /// Eight `press --hold 5` clients killed while holding (the kernel closes a killed client's socket, as
    /// closing the connections here does) take nothing from the presses after them: each of the next eight gets
    /// its own answer. Issue 29, item 7: 7 of the next 8 failed "no press was recognised" while the log
    /// recognised each, their answers taken by waiters the dead clients left behind.
    @Test func killedHeldPressesDoNotTakeTheAnswersOfLaterPresses() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator(["--slots", "slot-1"])
        let pairingPort = try FreePorts.take()
        let config = try harness.writeConfig(emulator: emulator, pairingPort: pairingPort, cooldownSeconds: 600)
        _ = try harness.startAgent(config: config)
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        let socket = harness.directory + "/state/control.sock"
        var held: [UnixConnection] = []
        for _ in 0..<8 {
            let connection = try UnixConnection(path: socket)
            connection.send(UnixConnection.post("/press", #"{"input":"button","holdSeconds":5}"#))
            held.append(connection)
        }
        try harness.waitUntil("the eight presses held down") {
            let state = try boardState(harness)
            return state["pressesInFlight"] as? Int == 8 && (state["inputs"] as? [String: Bool])?["button"] == true
        }
        held.removeAll()
        try harness.waitUntil("the killed clients' presses ended") {
            try boardState(harness)["pressesInFlight"] as? Int == 0
        }
        // The buttons they held were released: that press is recognised (and orders), answered to no one.
        try harness.waitUntil("the released hold recognised") { harness.agentLogs.contains("press recognised") }
        for attempt in 1...8 {
            let press = try harness.run("replenish-agent", ["press", "button", "--config", config])
            #expect(press.status == 0, "press \(attempt) after the killed ones: \(press.error)")
        }
        let recognised = harness.agentLogs.split(separator: "\n").filter { $0.contains("press recognised") }.count
        #expect(recognised >= 9, "\(harness.agentLogs)")
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func aSensorThatOrderedDoesNotOrderAgainAfterARestartWhileStillLow() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator(["--slots", "slot-1,slot-9"])
        let pairingPort = try FreePorts.take()
        let config = try harness.writeConfig(
            emulator: emulator, pairingPort: pairingPort, tankSlot: "slot-9", board: try fastBoard(harness))
        let first = try harness.startAgent(config: config)
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        func placed() throws -> Int { (try harness.stats(emulator)["ordersPlaced"] as? [String: Int])?["slot-9"] ?? 0 }
        #expect(try harness.run("replenish-agent", ["level", "tank", "low", "--config", config]).status == 0)
        // Placed and written: the agent's outbox is empty (a kill before that write would resend, as it must).
        try harness.waitUntil("the sensor's order") {
            try placed() == 1 && harness.statusJSON(config: config)["pendingOrders"] as? Int == 0
        }
        // Delivered: DRS would place a second order now (no ORDER_INPROGRESS to hide a resend).
        _ = try harness.emulator(emulator, .post, "/admin/deliver/slot-9")
        try harness.kill9(first)

        // The agent starts again while the tank is still low: the sensor counts it low, and orders nothing.
        _ = try harness.startAgent(config: config)
        // The killed agent left its socket file behind: retry until the new agent answers on it.
        try harness.waitUntil("the restarted agent's control socket") {
            try harness.run("replenish-agent", ["level", "tank", "low", "--config", config]).status == 0
        }
        try harness.waitUntil("the sensor's low seen again") {
            harness.agentLogs.contains("level sensor low again before a refill was seen")
        }
        #expect(try placed() == 1)
        #expect(try harness.statusJSON(config: config)["pendingOrders"] as? Int == 0)

        // A refill (full for longer than minInactiveMs) re-arms it, durably; the next low orders.
        #expect(try harness.run("replenish-agent", ["level", "tank", "full", "--config", config]).status == 0)
        try harness.waitUntil("the refill") { harness.agentLogs.contains("level sensor: refill seen") }
        #expect(try harness.run("replenish-agent", ["level", "tank", "low", "--config", config]).status == 0)
        try harness.waitUntil("the second order") { try placed() == 2 }
        harness.expectNoSecretsInAgentOutput()
    }
}
