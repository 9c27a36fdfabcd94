import Foundation
import Testing

@testable import ReplenishAgent

/// #40.4 and #40.9: a stop during a token refresh where LWA rotates refresh tokens (and ends the old one) must
/// not lose the pairing, and a stop during a token write on a flash whose flushes stall must stay within the
/// 10 s graceful limit with the rotated token kept.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct StopDuringRefreshTests {
    static let rotating = ["--rotate-refresh-tokens", "--old-refresh-token-policy", "invalidate"]

    /// After a restart, a refresh is forced (DRS rejects the access token once) and the held press is ordered:
    /// only a device that kept the refresh token LWA holds now is still paired then.
    func expectThePairingKept(_ harness: Harness, emulator: String, config: String) throws {
        try harness.injectFault(emulator, path: "/replenish/slot-1", count: 1, #"{"kind":"status","status":401}"#)
        _ = try harness.startAgent(config: config)
        try harness.waitUntil("the press ordered after a refresh", timeout: 60) {
            let status = try harness.statusJSON(config: config)
            return status["pendingOrders"] as? Int == 0 || status["paired"] as? Bool == false
        }
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == true)
        #expect(!harness.agentLogs.contains("LWA no longer accepts the refresh token"))
        #expect(try harness.replenishEvents(emulator).filter { $0["outcome"] as? String == "placed" }.count == 1)
        harness.expectNoSecretsInAgentOutput()
    }

    static func tokenArrivals(_ harness: Harness, _ emulator: String) throws -> Int {
        try harness.arrivals(emulator, path: "/auth/o2/token").count
    }

    /// SIGTERM 1 s into a refresh LWA answers after 6 s, having rotated the refresh token: the stop lets the
    /// refresh already sent finish (within the graceful limit) and writes the new token.
    @Test func aStopDuringARefreshWhereLWARotatesKeepsThePairing() throws {
        let harness = Harness()
        let (emulator, config, agent, _) = try harness.startPairedAgent(emulatorArguments: Self.rotating)
        try harness.injectFault(emulator, path: "/replenish/slot-1", count: 1, #"{"kind":"status","status":401}"#)
        try harness.injectFault(emulator, path: "/auth/o2/token", count: 1, #"{"kind":"delay","seconds":6}"#)
        let before = try Self.tokenArrivals(harness, emulator)
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the refresh to reach LWA") { try Self.tokenArrivals(harness, emulator) > before }
        let arrived = ContinuousClock.now
        try harness.waitUntil("1 s into the refresh") { arrived.duration(to: .now) >= .seconds(1) }
        let stopping = ContinuousClock.now
        try harness.stop(agent)
        let milliseconds = stopping.duration(to: .now).milliseconds
        print("stop: \(milliseconds) ms from SIGTERM to exit, 1 s into a 6 s refresh")
        #expect(milliseconds < 10_000, "the stop took \(milliseconds) ms")
        // LWA has done its work (the rotation) 6 s after the request arrived, whether the agent waited or not.
        try harness.waitUntil("LWA's answer made", timeout: 15) { arrived.duration(to: .now) >= .seconds(7) }
        try expectThePairingKept(harness, emulator: emulator, config: config)
    }

    /// A stop while the rotated token's write waits on a flash whose every flush stalls 8 s: the stop stays within
    /// the graceful limit and the restart presents the token LWA holds.
    @Test func aStopDuringAStalledTokenWriteIsBoundedAndKeepsTheToken() throws {
        let harness = Harness()
        let shim = try FlashStallTests.buildShim(harness)
        let flushLog = harness.directory + "/flushes.log"
        let stallFile = harness.directory + "/stall-ms"
        // 30 s access tokens: the agent refreshes on its own about every 22 s.
        let emulator = try harness.startEmulator(
            Self.rotating + ["--slots", "slot-1", "--access-token-lifetime", "30"])
        let pairingPort = try FreePorts.take()
        let config = try harness.writeConfig(emulator: emulator, pairingPort: pairingPort)
        var environment = ProcessInfo.processInfo.environment
        environment["LD_PRELOAD"] = shim
        environment["FSYNC_STALL_FILE"] = stallFile
        environment["FSYNC_LOG"] = flushLog
        let agent = try harness.startAgent(config: config, environment: environment)
        defer { if agent.isRunning { kill(agent.processIdentifier, SIGKILL) } }
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        try harness.waitUntil("the first duties") {
            try harness.slotStatus(config: config, "slot-1")["subscribed"] as? Bool == true
        }
        // A press queued behind DRS errors, so the restart has an order to place.
        try harness.injectFault(emulator, path: "/replenish/slot-1", count: 1000, #"{"kind":"status","status":503}"#)
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the press refused once") { harness.loggedReplenishAttempts(slot: "slot-1") >= 1 }
        let flushedBefore = FlashStallTests.flushes(flushLog).count
        try "8000".write(toFile: stallFile, atomically: true, encoding: .utf8)
        try harness.waitUntil("the next refresh's token write to stall", timeout: 60) {
            FlashStallTests.flushes(flushLog).dropFirst(flushedBefore).contains { $0.path.contains("tokens") }
        }
        let stopping = ContinuousClock.now
        try harness.stop(agent, timeout: 30)
        let milliseconds = stopping.duration(to: .now).milliseconds
        print("stop: \(milliseconds) ms from SIGTERM to exit during a token write whose flushes stall 8 s")
        #expect(milliseconds < 10_000, "the stop took \(milliseconds) ms")
        try FileManager.default.removeItem(atPath: stallFile)
        _ = try harness.emulator(emulator, .delete, "/admin/faults")
        try expectThePairingKept(harness, emulator: emulator, config: config)
    }
}
