import Foundation
import Testing

@testable import ReplenishAgent

/// Bad files and a crowded control socket, against the real binaries (issue 19, items 6, 10 and 13 to 16): no
/// start that fails at every try while `check-config` passes, no command that hangs on a FIFO, no lock-out of
/// the owner, no duplicate key or shared GPIO line that passes unnoticed, no dumpable agent.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct HardeningTests {
    /// Runs `check-config` (and others) with a bound: a command that hangs is a failure, not a stuck test run.
    private func bounded(_ harness: Harness, _ arguments: [String], timeout: Double = 15) -> Harness.Finished? {
        do { return try harness.run("replenish-agent", arguments, timeout: timeout) } catch {
            Issue.record("replenish-agent \(arguments.joined(separator: " ")): \(error)")
            return nil
        }
    }

    private func isSocket(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK
    }

    private func stop(_ harness: Harness, _ agent: Process) throws {
        try harness.stop(agent)
    }

    // MARK: 6. No crash loop at start

    /// A regular file, a directory or a FIFO where the control socket goes: `check-config --before-run` lets the
    /// agent start (a note), and `run` moves the thing aside like a bad state file and binds its socket.
    @Test func aNonSocketAtTheControlSocketPathIsMovedAsideAndTheAgentStarts() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator()
        let config = try harness.writeConfig(emulator: emulator, pairingPort: try FreePorts.take())
        let state = harness.directory + "/state"
        let socket = state + "/control.sock"
        #expect(mkdir(state, 0o700) == 0)
        let makers: [(String, () -> Bool)] = [
            ("regular file", { FileManager.default.createFile(atPath: socket, contents: Data("x".utf8)) }),
            ("directory", { mkdir(socket, 0o700) == 0 }),
            ("FIFO", { mkfifo(socket, 0o600) == 0 }),
        ]
        for (kind, make) in makers {
            // Whatever the last round left there (the agent's own socket) goes first.
            _ = unlink(socket)
            #expect(make(), "\(kind)")
            let check = try #require(bounded(harness, ["check-config", "--before-run", "--config", config]))
            #expect(check.status == 0, "\(kind): \(check.error)")
            let agent = try harness.startAgent(config: config)
            try harness.waitUntil("the control socket (\(kind))", timeout: 30) {
                isSocket(socket) || !agent.isRunning
            }
            #expect(agent.isRunning, "\(kind): the agent stopped: \(harness.agentLogs)")
            #expect(isSocket(socket), "\(kind)")
            #expect(harness.agentLogs.contains("\(socket) is a \(kind)"), "\(kind)")
            if agent.isRunning { try stop(harness, agent) }
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: state)
        #expect(names.filter { $0.hasPrefix("control.sock.corrupt-") }.count == 3, "\(names)")
        // The agent's own socket left behind by a stop is a socket: bound anew, never moved aside.
        let agent = try harness.startAgent(config: config)
        try harness.waitUntil("the control socket again") { harness.agentLogs.contains("control socket ready") }
        try stop(harness, agent)
        #expect(try FileManager.default.contentsOfDirectory(atPath: state).count { $0.contains(".corrupt-") } == 3)
    }

    /// A state directory whose control socket path does not fit a unix socket address (103 bytes): a
    /// `check-config` error naming `stateDirectory` and the limit, even before `run`; `run` says the same at once
    /// and exits 78, the configuration's exit status (no restart under systemd).
    @Test func aStateDirectoryTooLongForTheControlSocketIsACheckConfigError() throws {
        let harness = Harness()
        let written = try harness.writeConfig(emulator: "http://127.0.0.1:9", pairingPort: try FreePorts.take())
        let long = harness.directory + "/" + String(repeating: "d", count: 99 - harness.directory.utf8.count)
        #expect(long.utf8.count == 100)
        let text = try String(contentsOfFile: written, encoding: .utf8)
            .replacingOccurrences(of: harness.directory + "/state", with: long)
        try text.write(toFile: written, atomically: true, encoding: .utf8)
        for flags in [["check-config"], ["check-config", "--before-run"]] {
            let check = try #require(bounded(harness, flags + ["--config", written]))
            #expect(check.status == 1, "\(flags): \(check.error)")
            #expect(check.error.contains("stateDirectory: "), "\(flags): \(check.error)")
            #expect(check.error.contains("103 bytes"), "\(flags): \(check.error)")
        }
        let run = try #require(bounded(harness, ["run", "--config", written], timeout: 30))
        #expect(run.status == RunCommand.configurationExitCode)
        #expect(run.error.contains("stateDirectory: ") && run.error.contains("103 bytes"), "\(run.error)")

        // The longest that fits, 90 bytes (103 less "/control.sock"), passes and binds.
        let fits = harness.directory + "/" + String(repeating: "f", count: 89 - harness.directory.utf8.count)
        #expect(fits.utf8.count == 90)
        try text.replacingOccurrences(of: long, with: fits).write(toFile: written, atomically: true, encoding: .utf8)
        let check = try #require(bounded(harness, ["check-config", "--config", written]))
        #expect(check.status == 0, "\(check.error)")
        let agent = try harness.startAgent(config: written)
        try harness.waitUntil("the control socket at 103 bytes") {
            harness.agentLogs.contains("control socket ready") || !agent.isRunning
        }
        #expect(isSocket(fits + "/control.sock"), "\(harness.agentLogs)")
        try stop(harness, agent)
    }

    // MARK: 10. Eight requests in flight

    /// Presses held open on the control socket (each a `press --hold` still in progress) do not lock the owner
    /// out: with 8 in flight a press and an owner command get through; at the cap a press gets a true "busy,
    /// retry", and owner commands still get through.
    @Test func requestsInFlightDoNotLockTheOwnerOut() throws {
        let harness = Harness()
        let (emulator, config, agent, _) = try harness.startPairedAgent()
        let socket = harness.directory + "/state/control.sock"
        var held: [UnixConnection] = []
        func hold(_ count: Int) throws {
            for _ in 0..<count {
                let connection = try UnixConnection(path: socket)
                connection.send(UnixConnection.post("/press", #"{"input":"button3","holdSeconds":110}"#))
                held.append(connection)
            }
            try harness.waitUntil("the agent to take the held requests") { held.allSatisfy { $0.unread == 0 } }
        }
        try hold(8)
        let press = try harness.run("replenish-agent", ["press", "button", "--config", config])
        #expect(press.status == 0, "\(press.error)")
        try harness.waitUntil("the order") {
            (try harness.stats(emulator)["ordersPlaced"] as? [String: Int])?["slot-1"] == 1
        }
        let cancel = try harness.run("replenish-agent", ["cancel-test-orders", "--config", config])
        #expect(cancel.status == 0, "\(cancel.error)")
        #expect(!cancel.error.contains("another replenish-agent") && !cancel.error.contains("not running"))
        let status = try harness.run("replenish-agent", ["status", "--json", "--config", config])
        #expect(status.status == 0)

        // At the cap of presses in flight: a true "busy", and the owner's commands still get through.
        try hold(ControlServer.Limits().pressesInFlight - 8)
        let busy = try harness.run("replenish-agent", ["press", "button", "--config", config])
        #expect(busy.status == 1)
        #expect(busy.error.contains("busy") && busy.error.contains("retry"), "\(busy.error)")
        #expect(!busy.error.contains("not running"), "\(busy.error)")
        let cancelAgain = try harness.run("replenish-agent", ["cancel-test-orders", "--config", config])
        #expect(cancelAgain.status == 0, "\(cancelAgain.error)")
        #expect(agent.isRunning)
        harness.expectNoSecretsInAgentOutput()
    }

    // MARK: 13. FIFOs and devices as files

    /// A FIFO as the config, the board file or the CA file: every command says which, at once, never hangs.
    @Test func aFIFOGivenAsTheConfigBoardOrCAFileIsRefusedAtOnce() throws {
        let harness = Harness()
        let written = try harness.writeConfig(emulator: "http://127.0.0.1:9", pairingPort: try FreePorts.take())
        let text = try String(contentsOfFile: written, encoding: .utf8)
        let fifo = harness.directory + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)

        for command in [["check-config"], ["status"], ["run"]] {
            let finished = try #require(bounded(harness, command + ["--config", fifo]))
            // run's exit for a configuration that stops it is 78 (no restart under systemd).
            #expect(finished.status == (command == ["run"] ? RunCommand.configurationExitCode : 1), "\(command)")
            #expect(finished.error.contains("\(fifo) is a FIFO, not a regular file"), "\(command): \(finished.error)")
        }

        let boardConfig = harness.directory + "/board-fifo.json"
        try text.replacingOccurrences(of: packageRoot() + "/board/simulated.json", with: fifo)
            .write(toFile: boardConfig, atomically: true, encoding: .utf8)
        for command in [["check-config"], ["status"]] {
            let finished = try #require(bounded(harness, command + ["--config", boardConfig]))
            #expect(finished.status == 1, "\(command)")
            #expect(
                finished.error.contains("board: \(fifo) is a FIFO, not a regular file"),
                "\(command): \(finished.error)")
        }

        let caConfig = harness.directory + "/ca-fifo.json"
        try text.replacingOccurrences(of: #""stateDirectory""#, with: #""tls":{"caFile":"\#(fifo)"},"stateDirectory""#)
            .write(toFile: caConfig, atomically: true, encoding: .utf8)
        let finished = try #require(bounded(harness, ["check-config", "--config", caConfig]))
        #expect(finished.status == 1)
        #expect(finished.error.contains("tls.caFile: \(fifo) is a FIFO, not a regular file"), "\(finished.error)")
    }

    // MARK: 14. Duplicate keys

    @Test func aDuplicateKeyIsACheckConfigErrorNamingIt() throws {
        let harness = Harness()
        let written = try harness.writeConfig(emulator: "http://127.0.0.1:9", pairingPort: try FreePorts.take())
        let text = try String(contentsOfFile: written, encoding: .utf8)
            .replacingOccurrences(of: #""serial":"TEST0001","#, with: #""serial":"TEST0001","serial":"OTHER0002","#)
        try text.write(toFile: written, atomically: true, encoding: .utf8)
        let check = try #require(bounded(harness, ["check-config", "--config", written]))
        #expect(check.status == 1)
        #expect(check.error.contains("device.serial: appears twice"), "\(check.error)")
    }

    // MARK: 15. Lines used twice

    @Test func twoInputsOrAnInputAndAnLEDOnOneLineAreACheckConfigError() throws {
        let harness = Harness()
        let board = harness.directory + "/board.json"
        try #"""
        {"name":"two on one","backend":"gpiod","chip":"gpiochip0",
         "inputs":[{"name":"button","line":17},{"name":"button2","line":17},{"name":"button3","line":22}],
         "outputs":[{"name":"led","line":22}]}
        """#.write(toFile: board, atomically: true, encoding: .utf8)
        let written = try harness.writeConfig(
            emulator: "http://127.0.0.1:9", pairingPort: try FreePorts.take(), board: board)
        let check = try #require(bounded(harness, ["check-config", "--config", written]))
        #expect(check.status == 1)
        #expect(
            check.error.contains("inputs[1].line: line 17 is also used by inputs[0] (button)"), "\(check.error)")
        #expect(
            check.error.contains("outputs[0].line: line 22 is also used by inputs[2] (button3)"), "\(check.error)")
    }

    // MARK: 16. Not dumpable

    /// The emulator serves a user without privileges, as the demo runs it on a developer's machine: it once set
    /// TCP_NODELAY at the socket level, which is SO_DEBUG there, refused to all but root (CAP_NET_ADMIN), and NIO
    /// closed every connection it accepted (the demo's pairing failed with "connection reset by peer").
    @Test(.enabled(if: geteuid() != 0 || FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func theEmulatorServesAnUnprivilegedUser() throws {
        let harness = Harness()
        let port = try FreePorts.take()
        let serve = ["serve", "--listen", "127.0.0.1:\(port)", "--slots", "slot-1"]
        let emulator: Process
        if geteuid() == 0 {
            let ids = ["--reuid=4245", "--regid=4245", "--clear-groups"]
            emulator = try harness.start(
                "/usr/bin/setpriv", ids + [Harness.binDirectory + "/replenish-emulator"] + serve,
                log: "emulator-unprivileged.log")
        } else {
            emulator = try harness.start("replenish-emulator", serve, log: "emulator-unprivileged.log")
        }
        defer { if emulator.isRunning { kill(emulator.processIdentifier, SIGKILL) } }
        try harness.waitUntil("the emulator to answer", timeout: 30) {
            (try? harness.stats("http://127.0.0.1:\(port)")) != nil || !emulator.isRunning
        }
        #expect(emulator.isRunning, "\(harness.read("emulator-unprivileged.log"))")
        // An answer, not a connection closed at once (the wait above ends on an answer or on the emulator's end).
        #expect((try? harness.stats("http://127.0.0.1:\(port)")) != nil)
    }

    /// The running agent is not dumpable: the kernel then makes its /proc files root's, whoever it runs as (so
    /// the agent runs as a user of its own here). Before, they were the agent's user's.
    @Test(.enabled(if: geteuid() != 0 || FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func theRunningAgentIsNotDumpable() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator()
        let config = try harness.writeConfig(emulator: emulator, pairingPort: try FreePorts.take())
        let uid: uid_t
        let agent: Process
        let run = ["run", "--config", config]
        if geteuid() == 0 {
            uid = 4244
            #expect(chown(harness.directory, uid, uid) == 0)
            let ids = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups"]
            agent = try harness.start(
                "/usr/bin/setpriv", ids + [Harness.binDirectory + "/replenish-agent"] + run, log: "agent-dumpable.log")
        } else {
            uid = geteuid()
            agent = try harness.start("replenish-agent", run, log: "agent-dumpable.log")
        }
        defer { if agent.isRunning { kill(agent.processIdentifier, SIGKILL) } }
        try harness.waitUntil("the agent's control socket") {
            harness.read("agent-dumpable.log").contains("control socket ready") || !agent.isRunning
        }
        #expect(agent.isRunning, "\(harness.read("agent-dumpable.log"))")
        var info = stat()
        #expect(stat("/proc/\(agent.processIdentifier)/environ", &info) == 0)
        #expect(info.st_uid == 0, "/proc/<agent>/environ is owned by uid \(info.st_uid) (the agent runs as \(uid))")
        // And no transparent huge pages (the entry point's prctl): the kernel shows it as `THP_enabled: 0`.
        let status = try String(contentsOfFile: "/proc/\(agent.processIdentifier)/status", encoding: .utf8)
        let thp = status.split(separator: "\n").first { $0.hasPrefix("THP_enabled:") }
        #expect(thp?.split(separator: "\t").last == "0", "\(thp ?? "no THP_enabled line")")
    }

    /// A crash leaves one line in the journal, although the agent writes no core file and the device binary has
    /// no unwind tables: the signal, where it happened and the return addresses as offsets into the binary (for
    /// `addr2line` on the unstripped copy), and the build. Then the process ends by that signal, as before.
    @Test func aCrashLeavesOneLineWithTheSignalTheOffsetsAndTheBuild() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator()
        let config = try harness.writeConfig(emulator: emulator, pairingPort: try FreePorts.take())
        let agent = try harness.start("replenish-agent", ["run", "--config", config], log: "agent-crash.log")
        defer { if agent.isRunning { kill(agent.processIdentifier, SIGKILL) } }
        try harness.waitUntil("the agent's control socket") {
            harness.read("agent-crash.log").contains("control socket ready") || !agent.isRunning
        }
        #expect(kill(agent.processIdentifier, SIGSEGV) == 0)
        try harness.waitUntil("the agent to end") { !agent.isRunning }
        #expect(agent.terminationReason == .uncaughtSignal && agent.terminationStatus == SIGSEGV)
        let log = harness.read("agent-crash.log")
        let line = log.split(separator: "\n").first { $0.hasPrefix("replenish-agent: crashed: ") }
        #expect(line?.hasPrefix("replenish-agent: crashed: SIGSEGV (11, sent by a process) at ") == true, "\(log)")
        // The signal comes in the C library (a wait), which keeps no frame pointer: the line then lists the code
        // addresses on the stack, the agent's own among them.
        #expect(line?.contains(" replenish-agent+0x") == true, "\(line ?? "no crash line")")
        #expect(line?.hasSuffix("; build \(BuildInfo.description)") == true, "\(line ?? "no crash line")")
    }
}
