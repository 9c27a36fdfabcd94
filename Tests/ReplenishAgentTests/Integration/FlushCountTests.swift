import Foundation
import Testing

@testable import ReplenishAgent

/// How often the real agent flushes (issue 30): every `fsync` and `fdatasync` wears the flash and, on a slow one,
/// stalls the disk lane. `FlashStallTests`'s `LD_PRELOAD` shim logs each one (stalled 0 ms here: this test only
/// counts), and the counts of three spans are bounded: a press and its answer, one token refresh, and an idle span.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct FlushCountTests {
    /// How long the shim's log must stay unchanged for the agent to count as done writing.
    static let quiet = 1.0

    /// Waits (bounded) until no flush was logged for `quiet` seconds.
    static func waitForQuiet(_ harness: Harness, _ log: String, timeout: Double = 20) throws {
        var seen = FlashStallTests.flushes(log).count
        var since = Date()
        try harness.waitUntil("\(quiet) s without a flush", timeout: timeout) {
            let count = FlashStallTests.flushes(log).count
            if count != seen {
                seen = count
                since = Date()
            }
            return Date().timeIntervalSince(since) >= quiet
        }
    }

    /// How many refreshes the agent logged so far (every incarnation).
    static func refreshes(_ harness: Harness) -> Int {
        harness.agentLogs.components(separatedBy: "access token refreshed").count - 1
    }

    /// The paths of the flushes logged after the first `from` (for the counts and their failure messages).
    static func paths(_ log: String, from: Int) -> [String] {
        FlashStallTests.flushes(log).dropFirst(from).map(\.path)
    }

    /// Paired, first duties done, the first refresh over (the next one is about 22 s away with 30 s tokens):
    /// a press and its answer flush at most 4 times, the next refresh at most twice, and 5 s with neither of them
    /// right after it not at all.
    @Test func aPressARefreshAndAnIdleSpanFlushAFewTimesAtMost() throws {
        let harness = Harness()
        let (emulator, config, pairingPort, flushLog, agent) = try FlashStallTests.startShimmedAgent(
            harness, stallMilliseconds: 0)
        defer { if agent.isRunning { kill(agent.processIdentifier, SIGKILL) } }

        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        try harness.waitUntil("the first duties", timeout: 60) {
            return try harness.slotStatus(config: config, "slot-1")["subscribed"] as? Bool == true
        }
        try Self.waitForQuiet(harness, flushLog)
        // The spans start right after a refresh: the next one is due 21 to 22.5 s later, well after the press.
        let paired = Self.refreshes(harness)
        try harness.waitUntil("the first token refresh", timeout: 60) { Self.refreshes(harness) > paired }
        try Self.waitForQuiet(harness, flushLog)
        #expect(FlashStallTests.flushes(flushLog).count > 0, "the shim logged no flush at all: is it loaded?")

        // A press and its answer: the order is durable, sent, answered, and the outbox empty again.
        let refreshesBeforePress = Self.refreshes(harness)
        let beforePress = FlashStallTests.flushes(flushLog).count
        let pressed = try harness.run("replenish-agent", ["press", "button", "--config", config])
        #expect(pressed.status == 0, "press failed: \(pressed.error)")
        try harness.waitUntil("the order's answer", timeout: 30) {
            return try harness.slotStatus(config: config, "slot-1")["lastResult"] as? String == "TEST_ORDER_PLACED"
        }
        try harness.waitUntil("the outbox to empty", timeout: 30) {
            return try harness.statusJSON(config: config)["pendingOrders"] as? Int == 0
        }
        try Self.waitForQuiet(harness, flushLog)
        let pressFlushes = Self.paths(flushLog, from: beforePress)
        #expect(Self.refreshes(harness) == refreshesBeforePress, "a token refresh happened during the press span")
        #expect(try harness.replenishEvents(emulator).count == 1)

        // One token refresh, nothing else going on.
        let refreshesBefore = Self.refreshes(harness)
        let beforeRefresh = FlashStallTests.flushes(flushLog).count
        try harness.waitUntil("the next token refresh", timeout: 60) {
            Self.refreshes(harness) > refreshesBefore
        }
        try Self.waitForQuiet(harness, flushLog)
        let refreshFlushes = Self.paths(flushLog, from: beforeRefresh)
        #expect(Self.refreshes(harness) == refreshesBefore + 1, "more than one refresh in the refresh span")

        // Idle: 5 s right after the refresh, the next one is 16 s or more away, no press.
        let beforeIdle = FlashStallTests.flushes(flushLog).count
        let idleStart = Date()
        try harness.waitUntil("5 s of idle", timeout: 10) { Date().timeIntervalSince(idleStart) >= 5 }
        let idleFlushes = Self.paths(flushLog, from: beforeIdle)
        #expect(Self.refreshes(harness) == refreshesBefore + 1, "a token refresh happened during the idle span")

        print("flush counts: press=\(pressFlushes.count) refresh=\(refreshFlushes.count) idle=\(idleFlushes.count)")
        #expect(pressFlushes.count <= 4, "a press and its answer flushed \(pressFlushes.count) times: \(pressFlushes)")
        #expect(refreshFlushes.count <= 2, "a token refresh flushed \(refreshFlushes.count) times: \(refreshFlushes)")
        #expect(idleFlushes.isEmpty, "5 s of idle flushed \(idleFlushes.count) times: \(idleFlushes)")

        try harness.stop(agent)
        harness.expectNoSecretsInAgentOutput()
    }
}
