import Foundation
import Testing

@testable import ReplenishAgent

/// Issue #40.1 and #40.2, against the real binaries: the agent's own calls are of this boot whatever the sandbox
/// hides, and their age is read from the boot's clock, not from a wall clock that steps. Each test failed on
/// the main this work started from (the press never sent; the resend parked as "sent over a day ago").
@Suite(.serialized, .onOwnThread, .tags(.process)) struct UnknownBootTests {
    func placed(_ harness: Harness, _ emulator: String) throws -> Int {
        try harness.replenishEvents(emulator).filter {
            $0["slot"] as? String == "slot-1" && $0["outcome"] as? String == "placed"
        }.count
    }

    /// #40.1: the runtime directory cannot be made (a file stands where its parent should be: as under the
    /// unit's `ProtectSystem=strict` for a path that is not its `RuntimeDirectory=`), the kernel's boot id is
    /// hidden (the unit's /proc) and nothing says the clock is synchronised. `check-config` fails naming the
    /// directory, `run` logs it at its start, and a press whose first answer is lost orders exactly once.
    @Test func withTheRuntimeDirectoryUnusableAPressOrdersOnce() throws {
        let harness = Harness()
        let launcher = try harness.unitsProcLauncher()
        let (emulator, config, agent, _) = try harness.startPairedAgent(agentLauncher: launcher)
        try harness.stop(agent)
        let blocker = harness.directory + "/not-a-directory"
        try "".write(toFile: blocker, atomically: true, encoding: .utf8)
        let unusable = blocker + "/run"
        let text = try String(contentsOfFile: config, encoding: .utf8)
            .replacingOccurrences(of: harness.directory + "/run", with: unusable)
        try text.write(toFile: config, atomically: true, encoding: .utf8)

        let check = try harness.run("replenish-agent", ["check-config", "--config", config])
        #expect(check.status != 0, "check-config passed: \(check.output)")
        #expect(check.error.contains("runtimeDirectory") && check.error.contains(unusable), "\(check.error)")

        _ = try harness.startAgent(config: config, launcher: launcher)
        try harness.waitUntil("the agent's control socket") {
            try harness.run("replenish-agent", ["status", "--config", config]).output.contains("paired")
        }
        try harness.injectFault(emulator, path: "/replenish/slot-1", count: 1, #"{"kind":"drop"}"#)
        try harness.waitUntil("a press accepted") {
            try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0
        }
        try harness.waitUntil("the press ordered", timeout: 30) {
            try placed(harness, emulator) == 1
                && harness.statusJSON(config: config)["pendingOrders"] as? Int == 0
        }
        #expect(harness.loggedReplenishAttempts(slot: "slot-1") == 2, "sent, its answer lost, sent again")
        #expect(try harness.statusJSON(config: config)["parkedOrders"] as? Int == 0)
        #expect(try placed(harness, emulator) == 1)
        #expect(harness.read("agent-2.log").contains("the runtime directory cannot be used"))
        harness.expectNoSecretsInAgentOutput()
    }

    /// #40.2: the call leaves while the wall clock is the restored one (3 days behind), its answer is lost
    /// before DRS has it, and the clock is then set right (stepped 3 days forward): the resend is seconds old
    /// by the boot's clock, so it leaves and orders once, instead of being parked as "sent over a day ago".
    @Test func aClockStepAfterALostAnswerStillOrdersOnce() throws {
        let harness = Harness()
        let offsetFile = harness.directory + "/faketime-offset"
        let environment = try RealHomesTests.fakedWallClock(offsetFile: offsetFile)
        let (emulator, config, _, _) = try harness.startPairedAgent(
            agentEnvironment: environment, agentLauncher: RealHomesTests.fakedWallClockLauncher)
        try harness.injectFault(emulator, path: "/replenish/slot-1", count: 2, #"{"kind":"drop"}"#)
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the first call's answer lost", timeout: 15) {
            harness.loggedReplenishAttempts(slot: "slot-1") >= 1
        }
        try "+259200\n".write(toFile: offsetFile, atomically: true, encoding: .utf8)
        try harness.waitUntil("the press ordered", timeout: 60) {
            try placed(harness, emulator) == 1 || harness.agentLogs.contains("order parked")
        }
        #expect(!harness.agentLogs.contains("order parked"), "parked after the clock step")
        #expect(try placed(harness, emulator) == 1)
        #expect(try harness.statusJSON(config: config)["parkedOrders"] as? Int == 0)
        harness.expectNoSecretsInAgentOutput()
    }
}
