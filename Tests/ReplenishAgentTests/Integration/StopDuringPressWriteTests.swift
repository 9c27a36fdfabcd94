import Foundation
import Testing

@testable import ReplenishAgent

/// #50.8 and the deregistration note of #50.9: a stop, or a kill, while a press or an owner command is written
/// to a flash whose flushes stall (`FlashStallTests`' shim, turned on through a file once the agent is paired).
/// The stop stays within 10 s, and the command says what the disk holds: `press` exits 0 only for a press the
/// agent confirmed, `PressCommand.keptExitCode` for one that is written and will be ordered after the restart,
/// 1 only for one that is certainly not recorded.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct StopDuringPressWriteTests {
    /// Where the stop comes: in the flush of the press's new file (before its rename: not written yet), or in
    /// the flush of the state directory after it (the press is written).
    enum Point: String, CustomTestStringConvertible, Sendable {
        case fileFlush, directoryFlush
        var testDescription: String { rawValue }
    }

    /// An emulator with the default token lifetime (no refresh, no token write, in the test's span), a config,
    /// and the agent under the shim with its stall read from the returned `stallFile` (none: no stall).
    static func startAgent(_ harness: Harness) throws -> (
        emulator: String, config: String, agent: Process, flushLog: String, stallFile: String
    ) {
        let shim = try FlashStallTests.buildShim(harness)
        let flushLog = harness.directory + "/flushes.log"
        let stallFile = harness.directory + "/stall-ms"
        var environment = ProcessInfo.processInfo.environment
        environment["LD_PRELOAD"] = shim
        environment["FSYNC_STALL_FILE"] = stallFile
        environment["FSYNC_LOG"] = flushLog
        let (emulator, config, agent, _) = try harness.startPairedAgent(agentEnvironment: environment)
        return (emulator, config, agent, flushLog, stallFile)
    }

    /// Starts `replenish-agent ARGUMENTS` with its standard output and error in one pipe.
    static func spawn(_ arguments: [String]) throws -> (process: Process, output: Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Harness.binDirectory + "/replenish-agent")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try Harness.spawning.withLock { try process.run() }
        return (process, output)
    }

    /// Waits (bounded) for `process` and returns its exit status and what it printed.
    static func finish(_ harness: Harness, _ process: Process, _ output: Pipe, timeout: Double = 40) throws
        -> (status: Int32, said: String)
    {
        try harness.waitUntil("the command to end", timeout: timeout) { !process.isRunning }
        let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return (process.terminationStatus, said)
    }

    /// SIGTERM 0.5 s into the press's file flush, or just as the directory's flush begins, with every flush
    /// stalling `stall` ms: the stop takes less than 10 s; a press whose file was renamed before the agent
    /// ended is answered as kept (its own exit status) and is on disk; one that was not is answered as not
    /// taken (exit 1) and is not on disk.
    @Test(arguments: [(6000, Point.fileFlush), (15000, .fileFlush), (6000, .directoryFlush), (15000, .directoryFlush)])
    func aStopDuringAStalledPressWriteIsBoundedAndToldTheTruth(stall: Int, point: Point) throws {
        let harness = Harness()
        let (_, config, agent, flushLog, stallFile) = try Self.startAgent(harness)
        defer { if agent.isRunning { kill(agent.processIdentifier, SIGKILL) } }
        let before = FlashStallTests.flushes(flushLog).count
        try "\(stall)".write(toFile: stallFile, atomically: true, encoding: .utf8)
        let (press, output) = try Self.spawn(["press", "button", "--config", config])
        defer { if press.isRunning { kill(press.processIdentifier, SIGKILL) } }
        try harness.waitUntil("the press's stalled flush", timeout: 20) {
            let flushes = FlashStallTests.flushes(flushLog).dropFirst(before)
            guard let file = flushes.firstIndex(where: { $0.path.contains("outbox.json") }) else { return false }
            return point == .fileFlush || flushes[file...].contains { $0.path.hasSuffix("/state") }
        }
        if point == .fileFlush { usleep(500_000) }
        let stopping = ContinuousClock.now
        try harness.stop(agent, timeout: Double(stall) / 1000 + 15)
        let milliseconds = stopping.duration(to: .now).milliseconds
        print("stop: \(milliseconds) ms from SIGTERM to exit, in the press's \(point) stalled \(stall) ms")
        #expect(milliseconds < 10_000, "the stop took \(milliseconds) ms")
        let (status, said) = try Self.finish(harness, press, output)
        try FileManager.default.removeItem(atPath: stallFile)
        // What the disk holds now that the agent is gone: the command must have said the same.
        let pending = try harness.statusJSON(config: config)["pendingOrders"] as? Int
        let written = point == .directoryFlush || stall < 8000
        #expect(pending == (written ? 1 : 0), "pendingOrders \(pending ?? -1); press said (\(status)): \(said)")
        if pending == 1 {
            #expect(status == PressCommand.keptExitCode, "press exited \(status): \(said)")
            #expect(said.contains("kept and will be ordered"), "\(said)")
        } else {
            #expect(status == 1, "press exited \(status): \(said)")
            #expect(said.contains("not taken"), "\(said)")
        }
        harness.expectNoSecretsInAgentOutput()
    }

    /// #50.9: a SIGKILL 4 s into a `deregister` (a press queued behind DRS errors, every flush stalling 1.5 s):
    /// the command sees the agent gone and finishes the deregistration itself, as it does when no agent runs.
    @Test func aKillDuringADeregistrationLeavesItToTheCommand() throws {
        let harness = Harness()
        let (emulator, config, agent, _, stallFile) = try Self.startAgent(harness)
        defer { if agent.isRunning { kill(agent.processIdentifier, SIGKILL) } }
        try harness.injectFault(emulator, path: "/replenish/slot-1", count: 1000, #"{"kind":"status","status":503}"#)
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the press refused once") { harness.loggedReplenishAttempts(slot: "slot-1") >= 1 }
        try "1500".write(toFile: stallFile, atomically: true, encoding: .utf8)
        let (deregister, output) = try Self.spawn(["deregister", "--config", config])
        defer { if deregister.isRunning { kill(deregister.processIdentifier, SIGKILL) } }
        usleep(4_000_000)
        try harness.kill9(agent)
        let (status, said) = try Self.finish(harness, deregister, output)
        #expect(status == 0, "deregister exited \(status): \(said)")
        #expect(said.contains("tokens and queued presses wiped"), "\(said)")
        let state = try harness.statusJSON(config: config)
        #expect(state["paired"] as? Bool == false)
        #expect(state["pendingOrders"] as? Int == 0)
        harness.expectNoSecretsInAgentOutput()
    }
}
