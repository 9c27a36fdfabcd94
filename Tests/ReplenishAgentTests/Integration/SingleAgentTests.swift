import Foundation
import Testing

@testable import ReplenishAgent

/// One agent per state directory, and a start that survives bad state files, against the real binary.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct SingleAgentTests {
    /// The pairing endpoints answer (200, or 429 when this test's own polling hit deviceInfo's rate limit).
    func pairingServed(_ port: Int) -> Bool {
        let status =
            (try? CurlEasy(options: .init()).perform(
                HTTPRequest(method: .get, url: "http://127.0.0.1:\(port)/provision/deviceInfo")))?.status
        return status == 200 || status == 429
    }

    @Test func aSecondRunOnTheSameStateDirectoryExitsAtOnceWithTheReason() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator()
        let pairingPort = try FreePorts.take()
        let config = try harness.writeConfig(emulator: emulator, pairingPort: pairingPort)
        let state = harness.directory + "/state"
        let first = try harness.startAgent(config: config)
        // Serving pairing means the first agent holds the lock and has read its state.
        try harness.waitUntil("the first agent's pairing endpoints") { pairingServed(pairingPort) }

        let started = Date()
        let second = try harness.run("replenish-agent", ["run", "--config", config], timeout: 30)
        let seconds = Date().timeIntervalSince(started)
        #expect(second.status == 1)
        #expect(
            second.error.contains("another replenish-agent (pid \(first.processIdentifier)) is running on \(state)"),
            "\(second.error)")
        #expect(seconds < 10, "the second agent took \(seconds) s to give up")
        #expect(first.isRunning)
        #expect(pairingServed(pairingPort))
        // Commands that only read do not take the lock.
        let status = try harness.run("replenish-agent", ["status", "--json", "--config", config])
        #expect(status.status == 0 && status.output.contains(#""paired":false"#))

        // A killed agent's lock goes with it: the next one starts.
        try harness.kill9(first)
        let third = try harness.startAgent(config: config)
        try harness.waitUntil("the restarted agent's pairing endpoints") { pairingServed(pairingPort) }
        #expect(third.isRunning)
        #expect(try String(contentsOfFile: state + "/lock", encoding: .utf8).hasPrefix("\(third.processIdentifier)\n"))
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func badStateFilesAreMovedAsideAndTheAgentStarts() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator(["--slots", "slot-1"])
        let pairingPort = try FreePorts.take()
        let config = try harness.writeConfig(emulator: emulator, pairingPort: pairingPort)
        let state = harness.directory + "/state"
        #expect(mkdir(state, 0o700) == 0)
        #expect(mkfifo(state + "/outbox.json", 0o600) == 0)
        #expect(mkdir(state + "/status.json", 0o700) == 0)
        // A token file elsewhere, linked in: never followed.
        let elsewhere = harness.directory + "/elsewhere.json"
        try
            #"{"version":1,"clientId":"c","refreshToken":"Atzr|fixture-refresh","accessToken":"Atza|fixture-access","accessTokenExpiresAt":1800000000,"accessTokenLifetime":3600}"#
            .write(toFile: elsewhere, atomically: false, encoding: .utf8)
        #expect(symlink(elsewhere, state + "/tokens.json") == 0)
        try "{\"version\":1,\"torn".write(toFile: state + "/outbox.json.tmp-99999", atomically: false, encoding: .utf8)

        let agent = try harness.startAgent(config: config)
        try harness.waitUntil("the pairing endpoints") { pairingServed(pairingPort) }
        #expect(agent.isRunning)
        let names = try FileManager.default.contentsOfDirectory(atPath: state)
        for file in StateDirectory.stateFileNames {
            #expect(names.contains { $0.hasPrefix(file + ".corrupt-") }, "\(file): \(names)")
        }
        #expect(!names.contains("outbox.json.tmp-99999"))
        let logs = harness.agentLogs
        #expect(logs.contains("\(state)/outbox.json is not a regular file (a FIFO)"))
        #expect(logs.contains("\(state)/status.json is not a regular file (a directory)"))
        #expect(logs.contains("\(state)/tokens.json is a symbolic link, not a regular file"))
        #expect(logs.contains("removed \(state)/outbox.json.tmp-99999, left by an interrupted write"))

        // It works: paired through the companion flow, a press ordered.
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        try harness.waitUntil("the first duties") {
            try harness.slotStatus(config: config, "slot-1")["subscribed"] as? Bool == true
        }
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the order") {
            (try harness.slotStatus(config: config, "slot-1")["lastResult"] as? String) == "TEST_ORDER_PLACED"
        }
        #expect(agent.isRunning)
        harness.expectNoSecretsInAgentOutput()
    }

    /// `check-config` names each file problem and exits 1; with `--before-run` (the unit's ExecCondition) the
    /// problems `run` deals with itself are notes, so they never keep the agent from starting and repairing them.
    @Test func checkConfigNamesEachFileAndBeforeRunLetsTheAgentRepairThem() throws {
        let harness = Harness()
        let config = try harness.writeConfig(emulator: "http://127.0.0.1:9", pairingPort: try FreePorts.take())
        let state = harness.directory + "/state"
        #expect(mkdir(state, 0o700) == 0)
        #expect(mkfifo(state + "/outbox.json", 0o600) == 0)
        try "{}".write(toFile: state + "/status.json", atomically: false, encoding: .utf8)
        chmod(state + "/status.json", 0o644)
        let ok = try harness.run("replenish-agent", ["check-config", "--config", config])
        #expect(ok.status == 1)
        let lines = ok.error.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("stateDirectory: \(state)/outbox.json is a FIFO, not a regular file") })
        #expect(lines.contains("stateDirectory: \(state)/status.json has mode 644; it must be 600"))
        #expect(lines.count == 2, "\(lines)")

        let beforeRun = try harness.run("replenish-agent", ["check-config", "--before-run", "--config", config])
        #expect(beforeRun.status == 0)
        #expect(beforeRun.error.split(separator: "\n").allSatisfy { $0.hasPrefix("note: stateDirectory: ") })
        #expect(beforeRun.error.contains("\(state)/outbox.json is a FIFO"))

        // The state directory itself open to others stops both, as it stops `run`.
        chmod(state, 0o755)
        let open = try harness.run("replenish-agent", ["check-config", "--before-run", "--config", config])
        #expect(open.status == 1)
        #expect(open.error.contains("stateDirectory: \(state) has mode 755; group and others must have no access"))
    }

    /// The agent as its own user (not root), as systemd runs it: another owner's 0600 token file cannot even be
    /// opened, and is still moved aside for its owner instead of stopping the start.
    @Test(.enabled(if: geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func anAgentThatIsNotRootMovesAsideAFileItCannotOpen() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator()
        let pairingPort = try FreePorts.take()
        let config = try harness.writeConfig(emulator: emulator, pairingPort: pairingPort)
        let state = harness.directory + "/state"
        let uid: uid_t = 4243
        #expect(chown(harness.directory, uid, uid) == 0)
        #expect(mkdir(state, 0o700) == 0 && chown(state, uid, uid) == 0)
        let tokens = state + "/tokens.json"
        try
            #"{"version":1,"clientId":"c","refreshToken":"Atzr|fixture-refresh","accessToken":"Atza|fixture-access","accessTokenExpiresAt":1800000000,"accessTokenLifetime":3600}"#
            .write(toFile: tokens, atomically: false, encoding: .utf8)
        #expect(chmod(tokens, 0o600) == 0)  // root's, unreadable to the agent

        let agent = try harness.start(
            "/usr/bin/setpriv",
            [
                "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", Harness.binDirectory + "/replenish-agent", "run",
                "--config", config,
            ], log: "agent-as-user.log")
        defer {
            if agent.isRunning { kill(agent.processIdentifier, SIGKILL) }
        }
        try harness.waitUntil("the pairing endpoints") { pairingServed(pairingPort) }
        #expect(agent.isRunning)
        let text = harness.read("agent-as-user.log")
        #expect(text.contains("state file \(tokens) is owned by uid 0, not the agent's uid \(uid)"), "\(text)")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: state).contains { $0.hasPrefix("tokens.json.corrupt-") }
        )
        #expect(!FileManager.default.fileExists(atPath: tokens))
        harness.expectNoSecretsInAgentOutput()
    }
}
