import Foundation
import Testing

@testable import ReplenishAgent

/// Code-based linking with the real binaries: the code in `status`, the customer entering it at the emulator
/// (`/admin/enter-code`), paired, a press that orders; LWA unreachable then back; restarts in the middle; a
/// code that expires before it is entered. The emulator is strict (it answers `slow_down` to a poll sooner
/// than the interval), so its counters show the agent kept the interval. Small intervals keep these short.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct CodeLinkingProcessTests {
    /// The code `status --json` shows, if any.
    func linking(_ harness: Harness, config: String) throws -> [String: String]? {
        try harness.statusJSON(config: config)["linking"] as? [String: String]
    }

    func waitForCode(_ harness: Harness, config: String, otherThan previous: String? = nil, timeout: Double = 30)
        throws -> String
    {
        var code: String?
        try harness.waitUntil("a code in status", timeout: timeout) {
            code = try linking(harness, config: config)?["userCode"]
            return code != nil && code != previous
        }
        return code!
    }

    func enter(_ harness: Harness, _ emulator: String, _ code: String) throws -> [String: Any] {
        try harness.emulator(emulator, .post, "/admin/enter-code", body: #"{"userCode":"\#(code)"}"#)
    }

    func waitUntilPaired(_ harness: Harness, config: String) throws {
        try harness.waitUntil("paired") {
            let status = try harness.statusJSON(config: config)
            return status["paired"] as? Bool == true && status["linking"] == nil
        }
    }

    func polls(_ harness: Harness, _ emulator: String) throws -> [String: Int] {
        try harness.stats(emulator)["codePairPolls"] as? [String: Int] ?? [:]
    }

    @Test func theCodeInStatusLinksTheDeviceAndAPressOrders() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator(["--code-pair-interval", "2", "--slots", "slot-1"])
        let config = try harness.writeConfig(emulator: emulator, codeLinking: true)
        #expect(try harness.run("replenish-agent", ["check-config", "--config", config]).status == 0)
        _ = try harness.startAgent(config: config)

        let code = try waitForCode(harness, config: config)
        let status = try harness.statusJSON(config: config)
        let shown = try #require(status["linking"] as? [String: String])
        #expect(shown["verificationURI"] == "https://amazon.com/us/code")
        let expiresAt = try #require(shown["expiresAt"])
        #expect(ISO8601DateFormatter().date(from: expiresAt) != nil, "\(expiresAt)")
        #expect(status["paired"] as? Bool == false && status["pairingMode"] as? String == "code")
        let human = try harness.run("replenish-agent", ["status", "--config", config]).output
        #expect(human.contains("enter code \(code) at https://amazon.com/us/code"), "\(human)")
        // Unpaired, a press is refused with the reason.
        #expect(
            try harness.run("replenish-agent", ["press", "button", "--config", config]).error.contains("not paired"))

        // A few polls, all pending: the agent keeps the interval (the strict emulator would say slow_down).
        try harness.waitUntil("two polls") { (try polls(harness, emulator)["authorization_pending"] ?? 0) >= 2 }
        let entered = try enter(harness, emulator, code)
        #expect(entered["entered"] as? Bool == true)
        #expect((entered["device"] as? [String: String]) == ["serial": "TEST0001", "model": "model-1"])
        try waitUntilPaired(harness, config: config)
        let pollsWhenPaired = try polls(harness, emulator).values.reduce(0, +)
        let stats = try harness.stats(emulator)
        #expect((stats["tokenGrants"] as? [String: Int])?["device_code"] == 1)
        #expect(try polls(harness, emulator)["slow_down"] == nil)
        #expect(try polls(harness, emulator)["granted"] == 1)
        #expect(stats["codePairsIssued"] as? Int == 1)
        let human2 = try harness.run("replenish-agent", ["status", "--config", config]).output
        #expect(!human2.contains(code))

        // Paired as after a companion pairing: duties, then a press orders.
        try harness.waitUntil("subscriptions") {
            try harness.slotStatus(config: config, "slot-1")["subscribed"] as? Bool == true
        }
        let press = try harness.run("replenish-agent", ["press", "button", "--config", config])
        #expect(press.status == 0, "\(press.error)")
        try harness.waitUntil("the order") {
            (try harness.slotStatus(config: config, "slot-1")["lastResult"] as? String) == "TEST_ORDER_PLACED"
        }
        // Polling stopped once paired (the duties and the order took longer than the interval).
        #expect(try polls(harness, emulator).values.reduce(0, +) == pollsWhenPaired)

        // A factory reset unpairs: linking starts again, with a new code in status (the reset wiped the file).
        let reset = try harness.run("replenish-agent", ["reset", "--config", config])
        #expect(reset.status == 0, "\(reset.error)")
        let again = try waitForCode(harness, config: config, otherThan: code)
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == false)
        #expect(try harness.stats(emulator)["codePairsIssued"] as? Int == 2)
        #expect(!again.isEmpty)
        #expect(harness.agentLogs.contains(code), "the code is logged for a serial console")
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func lwaUnreachableThenFaultedThenBack() throws {
        let harness = Harness()
        // Nothing listens yet where the config points.
        let port = try FreePorts.take()
        let config = try harness.writeConfig(emulator: "http://127.0.0.1:\(port)", codeLinking: true)
        let agent = try harness.startAgent(config: config)
        try harness.waitUntil("two failed code pair requests") {
            harness.agentLogs.components(separatedBy: "code-based linking: no code pair").count - 1 >= 2
        }
        let offline = try harness.statusJSON(config: config)
        #expect(offline["linking"] == nil && offline["paired"] as? Bool == false)
        #expect((offline["pairingState"] as? String)?.contains("no code to enter yet") == true)

        // LWA comes up answering 503 to the next code pair request. The agent is stopped (SIGSTOP) meanwhile, so
        // its next retry cannot reach the emulator before the fault is queued; nothing of it is in flight, as
        // every try so far was refused.
        #expect(agent.suspend())
        let emulator: String
        do {
            defer { #expect(agent.resume()) }
            emulator = try harness.startEmulator(["--code-pair-interval", "1", "--slots", "slot-1"], port: port)
            try harness.injectFault(
                emulator, path: "/auth/O2/create/codepair", count: 1, #"{"kind":"status","status":503}"#)
        }
        let code = try waitForCode(harness, config: config)
        #expect((try harness.stats(emulator)["faultsInjected"] as? [String: Int])?["status"] == 1)
        // A poll without an answer (dropped) and one answered 503: the same code, polled again later.
        _ = try harness.emulator(
            emulator, .post, "/admin/faults", body: #"{"path":"/auth/o2/token","count":1,"fault":{"kind":"drop"}}"#)
        try harness.injectFault(emulator, path: "/auth/o2/token", count: 1, #"{"kind":"status","status":503}"#)
        try harness.waitUntil("both poll faults used") {
            (try harness.emulator(emulator, .get, "/admin/faults")["queue"] as? [Any])?.isEmpty == true
        }
        try harness.waitUntil("a poll after the faults") {
            (try polls(harness, emulator)["authorization_pending"] ?? 0) >= 1
        }
        #expect(try linking(harness, config: config)?["userCode"] == code)
        _ = try enter(harness, emulator, code)
        try waitUntilPaired(harness, config: config)
        #expect(try polls(harness, emulator)["slow_down"] == nil)
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func restartsInTheMiddleOfLinkingEndPairedWithNothingLost() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator(["--code-pair-interval", "1", "--slots", "slot-1"])
        let config = try harness.writeConfig(emulator: emulator, codeLinking: true)
        let first = try harness.startAgent(config: config)
        let code1 = try waitForCode(harness, config: config)

        // A graceful stop takes the code out of status (nobody polls for it any more).
        try harness.stop(first)
        #expect(first.terminationStatus == 0)
        #expect(try linking(harness, config: config) == nil)

        // A new start shows a new code; a SIGKILL cannot take it out, so status shows it until it expires.
        let second = try harness.startAgent(config: config)
        let code2 = try waitForCode(harness, config: config, otherThan: code1)
        try harness.kill9(second)
        #expect(try linking(harness, config: config)?["userCode"] == code2)

        // The next start gets a new pair and shows its code; entering it links the device.
        let third = try harness.startAgent(config: config)
        let code3 = try waitForCode(harness, config: config, otherThan: code2)
        _ = try enter(harness, emulator, code3)
        try waitUntilPaired(harness, config: config)
        #expect(try harness.stats(emulator)["codePairsIssued"] as? Int == 3)
        try harness.stop(third)

        // Durable: paired across a restart and a SIGKILL, and a press orders.
        let agent = try harness.startAgent(config: config)
        try harness.waitUntil("subscriptions, with this agent running") {
            try harness.statusJSON(config: config)["pid"] as? Int == Int(agent.processIdentifier)
                && harness.slotStatus(config: config, "slot-1")["subscribed"] as? Bool == true
        }
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == true)
        try harness.kill9(agent)
        let last = try harness.startAgent(config: config)
        #expect(try harness.statusJSON(config: config)["linking"] == nil)
        try harness.waitForControlSocket()
        let press = try harness.run("replenish-agent", ["press", "button", "--config", config])
        #expect(press.status == 0, "\(press.error)")
        try harness.waitUntil("the order") {
            (try harness.slotStatus(config: config, "slot-1")["lastResult"] as? String) == "TEST_ORDER_PLACED"
        }
        #expect((try harness.stats(emulator)["codePairsIssued"] as? Int) == 3, "no linking once paired")
        #expect(
            try harness.statusJSON(config: config)["pid"] as? Int == Int(last.processIdentifier) && last.isRunning,
            "the order came from the agent started after the SIGKILL")
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func aCodeThatExpiresBeforeItIsEnteredIsReplaced() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator([
            "--code-pair-lifetime", "10", "--code-pair-interval", "1", "--slots", "slot-1",
        ])
        let config = try harness.writeConfig(emulator: emulator, codeLinking: true)
        _ = try harness.startAgent(config: config)
        let first = try waitForCode(harness, config: config)
        // The second code must be entered within its 10 s: enough for a loaded machine's status commands.
        let second = try waitForCode(harness, config: config, otherThan: first, timeout: 25)
        #expect(second != first)
        // The expired code can no longer be entered; the new one links the device.
        let late = try enter(harness, emulator, first)
        #expect((late["message"] as? String)?.contains("expired") == true, "\(late)")
        _ = try enter(harness, emulator, second)
        try waitUntilPaired(harness, config: config)
        #expect(try polls(harness, emulator)["slow_down"] == nil)
        #expect((try harness.stats(emulator)["codePairsIssued"] as? Int ?? 0) >= 2)
        harness.expectNoSecretsInAgentOutput()
    }
}
