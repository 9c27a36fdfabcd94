import Foundation
import Testing

@testable import ReplenishAgent

/// The real `replenish-agent run` under a notify socket made by the test, as systemd would start it with
/// `Type=notify` and `WatchdogSec=`: READY with the status, watchdog pings, a new STATUS once paired, STOPPING
/// on SIGTERM, and no secret in any message.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct SystemdNotifyTests {
    @Test func readyStatusWatchdogAndStoppingFromTheRealAgent() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator(["--slots", "slot-1"])
        let pairingPort = try FreePorts.take()
        let config = try harness.writeConfig(emulator: emulator, pairingPort: pairingPort)
        let socket = try NotifySocket()

        let agent = Process()
        agent.executableURL = URL(fileURLWithPath: Harness.binDirectory + "/replenish-agent")
        agent.arguments = ["run", "--config", config]
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = socket.variable
        environment["WATCHDOG_USEC"] = "1000000"  // a ping every 0.5 s
        agent.environment = environment
        let log = harness.directory + "/agent-notify.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        agent.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        try Harness.spawning.withLock { try agent.run() }
        defer { if agent.isRunning { kill(agent.processIdentifier, SIGKILL) } }

        var messages: [String] = []
        func drain() {
            while let message = socket.receive() { messages.append(message) }
        }
        try harness.waitUntil("READY=1") {
            drain()
            return messages.contains { $0.hasPrefix("READY=1\n") }
        }
        #expect(messages.first == "READY=1\nSTATUS=pairing mode: waiting for the companion app; 0 orders pending\n")
        // No core dumps, whoever started it (a core would hold the tokens): RLIMIT_CORE is 0, soft and hard.
        let limits = try String(contentsOfFile: "/proc/\(agent.processIdentifier)/limits", encoding: .utf8)
        let core = limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") }
        #expect(core?.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2) == ["0", "0"])
        try harness.waitUntil("three watchdog pings") {
            drain()
            return messages.filter { $0 == "WATCHDOG=1\n" }.count >= 3
        }

        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        try harness.waitUntil("the paired status") {
            drain()
            return messages.contains { $0.hasPrefix("STATUS=paired; token fresh, expires ") }
        }

        kill(agent.processIdentifier, SIGTERM)
        try harness.waitUntil("the agent to stop", timeout: 20) { !agent.isRunning }
        drain()
        #expect(agent.terminationStatus == 0)
        #expect(messages.last == "STOPPING=1\nSTATUS=stopping\n")
        // Never a token in a status line (LWA's prefixes), nor anything but the protocol's fields.
        #expect(!messages.contains { $0.contains("Atza|") || $0.contains("Atzr|") })
        #expect(
            messages.allSatisfy { message in
                message.split(separator: "\n").allSatisfy {
                    ["READY=", "STATUS=", "WATCHDOG=", "STOPPING="].contains(where: $0.hasPrefix)
                }
            })
    }
}
