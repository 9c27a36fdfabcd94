import Foundation
import Testing

@testable import ReplenishAgent

/// What the commands tell a device maker, on the real binaries: `--version`, whether `status` sees the agent
/// running (the state directory's lock) before its first start, while it runs and after it stopped, and the keys
/// `status --json` always carries as `null`.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct MakerStatusTests {
    @Test func versionPrintsTheVersionAndTheCommit() throws {
        let harness = Harness()
        let result = try harness.run("replenish-agent", ["--version"])
        #expect(result.status == 0, "\(result.error)")
        let version = try String(contentsOfFile: packageRoot() + "/VERSION", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let line = result.output.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(line.hasPrefix("replenish-agent \(version) ("), "\(line)")
        // A commit (12 hex digits, maybe -dirty) when scripts/build-info.sh ran before the build, else "unknown".
        let commit = line.split(separator: " ").last.map { String($0.dropLast()) } ?? ""
        let hex = commit.split(separator: "-").first.map { $0.count == 12 && $0.allSatisfy(\.isHexDigit) } ?? false
        #expect(line.contains("commit ") && (commit == "unknown" || hex), "\(line)")
    }

    @Test func statusSaysWhetherTheAgentRunsBeforeItsFirstStartWhileItRunsAndAfterItStopped() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator(["--slots", "slot-1"])
        let pairingPort = try FreePorts.take()
        let config = try harness.writeConfig(emulator: emulator, pairingPort: pairingPort)

        // Never started: no state directory yet.
        var status = try harness.statusJSON(config: config)
        #expect(status["running"] as? Bool == false)
        #expect(status.keys.contains("pid") && status["pid"] is NSNull)
        #expect((status["pairingState"] as? String)?.contains("opens when the agent starts") == true, "\(status)")
        var text = try harness.run("replenish-agent", ["status", "--config", config])
        #expect(text.status == 0)
        #expect(text.output.contains("agent: not running"), "\(text.output)")
        #expect(text.output.contains("pairing window: opens when the agent starts"), "\(text.output)")
        #expect(!text.output.contains("pairing window closed"), "\(text.output)")

        let agent = try harness.startAgent(config: config)
        // The agent takes the lock and then writes its pid into the lock file: wait for both.
        try harness.waitUntil("status to see the agent running, with its pid") {
            status = try harness.statusJSON(config: config)
            return status["running"] as? Bool == true && status["pid"] as? Int == Int(agent.processIdentifier)
        }
        #expect(status["pid"] as? Int == Int(agent.processIdentifier), "\(status)")
        text = try harness.run("replenish-agent", ["status", "--config", config])
        #expect(text.output.contains("agent: running (pid \(agent.processIdentifier))"), "\(text.output)")

        agent.terminate()
        agent.waitUntilExit()
        status = try harness.statusJSON(config: config)
        #expect(status["running"] as? Bool == false && status["pid"] is NSNull, "\(status)")
        #expect((status["pairingState"] as? String)?.contains("opens when the agent starts") == true, "\(status)")
        text = try harness.run("replenish-agent", ["status", "--config", config])
        #expect(text.output.contains("agent: not running"), "\(text.output)")
    }

    @Test func anOrderDRSWasNotAskedAboutYetHasNullStatusAndCheckedAt() throws {
        let harness = Harness()
        let (emulator, config, agent, _) = try harness.startPairedAgent()
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the order, recorded") {
            (try harness.slotStatus(config: config, "slot-1")["order"] as? [String: Any]) != nil
        }
        // getOrderInfo is first asked minutes after the order (test phase): until then both are null, not absent.
        let order = try harness.slotStatus(config: config, "slot-1")["order"] as? [String: Any] ?? [:]
        #expect(order.keys.contains("status") && order["status"] is NSNull, "\(order)")
        #expect(order.keys.contains("checkedAt") && order["checkedAt"] is NSNull, "\(order)")
        #expect(order["open"] as? Bool == true)
        #expect(try (harness.stats(emulator)["orderInfoCalls"] as? Int ?? 0) == 0)
        agent.terminate()
        agent.waitUntilExit()
        harness.expectNoSecretsInAgentOutput()
    }
}
