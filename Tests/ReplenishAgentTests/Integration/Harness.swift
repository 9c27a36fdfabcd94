import Foundation
import Synchronization
import Testing

@testable import ReplenishAgent

/// Runs the real `replenish-agent` and `replenish-emulator` binaries as processes. Waits poll with bounded
/// timeouts; every process is killed when the harness goes.
final class Harness: @unchecked Sendable {
    let directory = temporaryDirectory()
    private var processes: [Process] = []
    /// Every emulator started (base URLs), for the secrets scan.
    private var emulators: [(base: String, caFile: String?)] = []
    /// What every `replenish-agent` command run to completion printed (press, status, …).
    private var commandOutputs = ""
    /// The setup key of the config `writeConfig` wrote last (with `setupKey`, or in the production phase), and
    /// the label's payload the companion pairs with (`pair`).
    private(set) var setupKey: SetupKey?
    var setupPayload: String? { setupKey.map { LabelPayload(serial: "TEST0001", key: $0).text } }

    static let binDirectory: String = {
        // REPLENISH_TEST_BIN: another build's products (a test seen failing against an earlier commit's build).
        if let other = ProcessInfo.processInfo.environment["REPLENISH_TEST_BIN"], !other.isEmpty { return other }
        // The test bundle sits beside the products it was built with.
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        var candidates = [URL(fileURLWithPath: exe).deletingLastPathComponent().path]
        candidates.append(packageRoot() + "/.build-tests/debug")
        candidates.append(packageRoot() + "/.build/debug")
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0 + "/replenish-agent") }
            ?? candidates[0]
    }()

    /// Held while a test makes a child's pipes and starts it. Foundation's `Process` closes in the child the
    /// descriptors it found open before the spawn, and `Pipe()` is not close-on-exec: a pipe that another test
    /// made in between would be inherited by that child, and the other test's read would wait for its exit.
    static let spawning = NSLock()

    deinit {
        for process in processes where process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    struct Finished {
        var status: Int32
        var output: String
        var error: String
    }

    /// Starts a long-running process with its output going to `log` files in the harness directory.
    @discardableResult
    /// `launcher`: a program that runs the binary (its first argument), such as `/usr/bin/env`.
    /// `binary`: a name in the build's bin directory, or an absolute path (a launcher such as `setpriv`).
    func start(
        _ binary: String, _ arguments: [String], log: String, environment: [String: String]? = nil,
        launcher: String? = nil
    ) throws -> Process {
        let process = Process()
        let path = binary.hasPrefix("/") ? binary : Self.binDirectory + "/" + binary
        process.executableURL = URL(fileURLWithPath: launcher ?? path)
        process.arguments = launcher == nil ? arguments : [path] + arguments
        if let environment { process.environment = environment }
        _ = FileManager.default.createFile(atPath: directory + "/" + log, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: directory + "/" + log))
        process.standardOutput = handle
        process.standardError = handle
        try Self.spawning.withLock { try process.run() }
        processes.append(process)
        if binary == "replenish-emulator" { emulatorProcesses.append(process) }
        return process
    }

    /// Every emulator started with `startEmulator` (and still tracked).
    private var emulatorProcesses: [Process] = []

    /// Kills every emulator this harness started (SIGKILL) and waits until they are gone: the network is down
    /// from the agent's side (connections refused). An emulator with `--state-file` comes back where it was.
    func stopEmulators() throws {
        for process in emulatorProcesses where process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try waitUntil("the emulators to stop", timeout: 10) { emulatorProcesses.allSatisfy { !$0.isRunning } }
        emulatorProcesses.removeAll()
    }

    /// Runs a command to completion (at most `timeout` seconds) and returns its output.
    /// `binary`: one of the package's products, or an absolute path (`/bin/mount`).
    func run(_ binary: String, _ arguments: [String], timeout: Double = 60) throws -> Finished {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary.hasPrefix("/") ? binary : Self.binDirectory + "/" + binary)
        process.arguments = arguments
        let (out, err) = try Self.spawning.withLock {
            let out = Pipe()
            let err = Pipe()
            process.standardOutput = out
            process.standardError = err
            try process.run()
            return (out, err)
        }
        processes.append(process)
        let collected = Mutex([Data(), Data()])
        let group = DispatchGroup()
        for (index, pipe) in [out, err].enumerated() {
            group.enter()
            DispatchQueue.global().async {
                let data = pipe.fileHandleForReading.readDataToEndOfFile()
                collected.withLock { $0[index] = data }
                group.leave()
            }
        }
        if group.wait(timeout: .now() + timeout) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            throw AgentError(.server, "\(binary) \(arguments.first ?? "") did not finish within \(timeout) s")
        }
        process.waitUntilExit()
        let finished = Finished(
            status: process.terminationStatus,
            output: String(decoding: collected.withLock { $0[0] }, as: UTF8.self),
            error: String(decoding: collected.withLock { $0[1] }, as: UTF8.self))
        // `label` prints the setup key: that is its purpose, so it is not scanned for secrets.
        if binary == "replenish-agent" && arguments.first != "label" {
            commandOutputs += finished.output + finished.error
        }
        return finished
    }

    func read(_ log: String) -> String {
        (try? String(contentsOfFile: directory + "/" + log, encoding: .utf8)) ?? ""
    }

    /// Polls `condition` every 50 ms for at most `timeout` seconds.
    func waitUntil(_ what: String, timeout: Double = 30, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if (try? condition()) == true { return }
            usleep(50_000)
        }
        if try condition() { return }
        throw AgentError(.server, "timed out after \(timeout) s waiting for \(what)")
    }

    /// Waits until the agent's control socket answers. Its file appears at bind(), a moment before listen(): a
    /// client that connects in between is refused (seen as a flaky `connection refused` on a loaded machine), so
    /// the file alone is not enough. Any HTTP answer (a 404 for `/`) will do.
    func waitForControlSocket() throws {
        let path = directory + "/state/control.sock"
        try waitUntil("the control socket to answer") {
            (try? CurlEasy(options: .init(unixSocketPath: path)).perform(
                HTTPRequest(method: .get, url: "http://localhost/"))) != nil
        }
    }

    /// Starts the emulator (on `port`, or a free one) and returns its base URL. `tls`: a folder made by
    /// `replenish-emulator make-ca`; the emulator then serves HTTPS through a TLS terminator in front of it
    /// (socat with OpenSSL, the server certificate of that folder), and the URL returned is the terminator's.
    func startEmulator(_ extra: [String] = [], tls: String? = nil, port: Int = 0) throws -> String {
        let portFile = directory + "/emulator.port"
        unlink(portFile)
        try start(
            "replenish-emulator", ["serve", "--listen", "127.0.0.1:\(port)", "--port-file", portFile] + extra,
            log: "emulator.log")
        var port = ""
        try waitUntil("the emulator's port") {
            port = ((try? String(contentsOfFile: portFile, encoding: .utf8)) ?? "").trimmingCharacters(
                in: .whitespacesAndNewlines)
            return !port.isEmpty
        }
        let plain = "http://127.0.0.1:\(port)"
        guard let tls else {
            emulators.append((plain, nil))
            return plain
        }
        let tlsPort = try FreePorts.take()
        try start(
            "/usr/bin/socat",
            [
                "OPENSSL-LISTEN:\(tlsPort),bind=127.0.0.1,reuseaddr,fork,cert=\(tls)/server.pem,key=\(tls)/server.key,verify=0",
                "TCP:127.0.0.1:\(port)",
            ], log: "tls-terminator.log")
        let base = "https://127.0.0.1:\(tlsPort)"
        let ca = tls + "/ca.pem"
        try waitUntil("the TLS terminator") {
            (try? CurlEasy(options: .init(caFile: ca)).perform(HTTPRequest(method: .get, url: base + "/admin/stats")))?
                .status == 200
        }
        emulators.append((base, ca))
        plainBases[base] = plain
        return base
    }

    /// The emulator's own plain-HTTP URL behind each TLS terminator: the emulator's `companion` (the phone app's
    /// stand-in) asks LWA for the code there; the agent under test is the one that talks HTTPS.
    private var plainBases: [String: String] = [:]

    /// `emulator`'s plain-HTTP URL (itself when it has no TLS terminator).
    func plainURL(_ emulator: String) -> String { plainBases[emulator] ?? emulator }

    /// Writes an agent config for the simulated board against `emulator`; returns its path. `codeLinking`: the
    /// config of code-based linking (`pairing.mode` `code`, `lwa.codePairURL` on the emulator), no pairing port.
    func writeConfig(
        emulator: String, pairingPort: Int = 0, slots: [String] = ["slot-1"], caFile: String? = nil,
        cooldownSeconds: Int = 0, tankSlot: String? = nil, board: String? = nil, pairingWindowMinutes: Int? = nil,
        codeLinking: Bool = false, phase: String = "test", buttonExtra: String = "", setupKey: Bool = false
    ) throws -> String {
        // A unit's setup key (`pairing.setupKeyFile`), which the production phase requires.
        let keyFile = setupKey || phase == "production" ? try writeSetupKey() : nil
        var buttons = zip(["button", "button2", "button3"], slots).map {
            #"{"input":"\#($0.0)","slot":"\#($0.1)","cooldownSeconds":\#(cooldownSeconds)\#(buttonExtra)}"#
        }
        if let tankSlot { buttons.append(#"{"input":"tank","slot":"\#(tankSlot)"}"#) }
        let tls = caFile.map { #""tls":{"caFile":"\#($0)"},"# } ?? ""
        let window = pairingWindowMinutes.map { #","windowMinutes":\#($0)"# } ?? ""
        let key = keyFile.map { #","setupKeyFile":"\#($0)""# } ?? ""
        let pairing =
            codeLinking ? #"{"mode":"code"}"# : #"{"listen":"127.0.0.1:\#(pairingPort)"\#(window)\#(key)}"#
        let codePair = codeLinking ? #","codePairURL":"\#(emulator)/auth/O2/create/codepair""# : ""
        let text = """
            {"device":{"serial":"TEST0001","model":"model-1","phase":"\(phase)"},
             "lwa":{"clientId":"amzn1.application-oa2-client.emulator","tokenURL":"\(emulator)/auth/o2/token"\(codePair)},
             "drs":{"baseURL":"\(emulator)"},\(tls)
             "stateDirectory":"\(directory)/state","runtimeDirectory":"\(directory)/run","board":"\(board ?? packageRoot() + "/board/simulated.json")",
             "buttons":[\(buttons.joined(separator: ","))],"pairing":\(pairing)}
            """
        let path = directory + "/agent.json"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Writes a new setup key file (mode 600) in the harness directory; returns its path.
    func writeSetupKey() throws -> String {
        var generator = SystemRandomNumberGenerator()
        let key = SetupKey(using: &generator)
        let path = directory + "/setup-key"
        try (key.hex + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        setupKey = key
        return path
    }

    /// Gives the config at `path` a new setup key (`pairing.setupKeyFile`), as a unit moved to production gets.
    func addSetupKey(config path: String) throws {
        let keyFile = try writeSetupKey()
        let text = try String(contentsOfFile: path, encoding: .utf8)
        try text.replacingOccurrences(of: #""pairing":{"#, with: #""pairing":{"setupKeyFile":"\#(keyFile)","#)
            .write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// A call to the emulator (admin interface), with the agent's own HTTP client.
    /// Every agent log this harness wrote (all incarnations).
    var agentLogs: String {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasPrefix("agent") && $0.hasSuffix(".log") }.sorted().map(read).joined()
    }

    private var incarnation = 0

    /// Starts (or restarts) the agent with its own log file (and `environment` instead of the test's own).
    @discardableResult
    func startAgent(config: String, environment: [String: String]? = nil, launcher: String? = nil) throws -> Process {
        incarnation += 1
        return try start(
            "replenish-agent", ["run", "--config", config], log: "agent-\(incarnation).log", environment: environment,
            launcher: launcher)
    }

    /// The replenish requests the agent logged (`sending replenish`, one line before each leaves the device)
    /// for `slot`, over every incarnation's log.
    func loggedReplenishAttempts(slot: String) -> Int {
        agentLogs.split(separator: "\n").filter { line in
            line.contains("sending replenish") && line.split(separator: " ").contains { $0 == "order.slot=\(slot)" }
        }.count
    }

    /// An emulator (slot `slot-1` and `emulatorArguments`) and an unpaired agent whose pairing port answers;
    /// `setupKey`: the unit has a setup key (`harness.setupKey`).
    @discardableResult
    func startUnpairedAgent(emulatorArguments: [String] = [], setupKey: Bool = true) throws
        -> (emulator: String, port: Int, config: String, agent: Process)
    {
        let emulator = try startEmulator(["--slots", "slot-1"] + emulatorArguments)
        let port = try FreePorts.take()
        let config = try writeConfig(emulator: emulator, pairingPort: port, setupKey: setupKey)
        let agent = try startAgent(config: config)
        try waitUntil("the pairing endpoints") { Self.pairingPortAnswers(port) }
        return (emulator, port, config, agent)
    }

    /// An emulator, a config and a running agent, paired through the companion flow, its first duties done.
    func startPairedAgent(
        emulatorArguments: [String] = [], slots: [String] = ["slot-1"], agentEnvironment: [String: String]? = nil,
        agentLauncher: String? = nil
    ) throws
        -> (emulator: String, config: String, agent: Process, pairingPort: Int)
    {
        let emulator = try startEmulator(emulatorArguments + ["--slots", slots.joined(separator: ",")])
        let pairingPort = try FreePorts.take()
        let config = try writeConfig(emulator: emulator, pairingPort: pairingPort, slots: slots)
        let agent = try startAgent(config: config, environment: agentEnvironment, launcher: agentLauncher)
        try pair(emulator: emulator, pairingPort: pairingPort)
        try waitUntil("the first duties") {
            let slotsStatus = try statusJSON(config: config)["slots"] as? [String: [String: Any]]
            return slots.allSatisfy { slotsStatus?[$0]?["subscribed"] as? Bool == true }
        }
        return (emulator, config, agent, pairingPort)
    }

    /// Pairs the running agent as the companion app would.
    @discardableResult
    func pair(emulator: String, pairingPort: Int) throws -> Finished {
        try waitUntil("the pairing endpoints") { Self.pairingPortAnswers(pairingPort) }
        let companion = try run(
            "replenish-emulator",
            ["companion", "--device", "http://127.0.0.1:\(pairingPort)", "--lwa", plainURL(emulator)]
                + (setupPayload.map { ["--setup", $0] } ?? []))
        guard companion.status == 0 else {
            throw AgentError(.server, "companion failed (\(companion.status)): \(companion.error)")
        }
        return companion
    }

    /// Whether the pairing port is open (its window too): any path but the endpoints answers 404, without
    /// starting a pairing session (deviceInfo is rate-limited per address).
    static func pairingPortAnswers(_ port: Int) -> Bool {
        (try? CurlEasy(options: .init()).perform(HTTPRequest(method: .get, url: "http://127.0.0.1:\(port)/")))?
            .status == 404
    }

    /// A launcher (`startAgent(launcher:)`) that runs its program with the shipped unit's view of /proc
    /// (`ProcSubset=pid`, `ProtectProc=invisible`): a private mount namespace with /proc mounted
    /// `subset=pid,hidepid=invisible`, where /proc/sys, and the kernel's boot id in it, does not exist; and, on
    /// a machine where timesyncd runs, an empty /run/systemd/timesync (nothing says the clock is synchronised,
    /// as on a board without timesyncd). Mounting needs root, as the tests have here and in CI; the launcher is
    /// checked before it is handed out.
    func unitsProcLauncher() throws -> String {
        let path = directory + "/units-proc"
        let script = """
            #!/bin/sh
            exec /usr/bin/unshare --mount --propagation private /bin/sh -c \
              'mount -t proc -o subset=pid,hidepid=invisible proc /proc &&
               { [ ! -d /run/systemd/timesync ] || mount -t tmpfs tmpfs /run/systemd/timesync; } && exec "$@"' sh "$@"

            """
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
        let hidden = try run(path, ["/bin/cat", "/proc/sys/kernel/random/boot_id"])
        let own = try run(path, ["/bin/cat", "/proc/self/status"])
        guard hidden.status != 0, own.status == 0, own.output.contains("Pid:") else {
            throw AgentError(
                .configuration,
                "cannot give a process the unit's view of /proc (root and unshare are needed): \(hidden.error)")
        }
        return path
    }

    /// Stops with SIGTERM (a graceful stop) and waits until the process is gone.
    func stop(_ process: Process, timeout: Double = 15) throws {
        process.terminate()
        try waitUntil("the agent to stop", timeout: timeout) { !process.isRunning }
    }

    /// Kills with SIGKILL and waits until the process is gone.
    func kill9(_ process: Process) throws {
        kill(process.processIdentifier, SIGKILL)
        try waitUntil("the agent to die", timeout: 10) { !process.isRunning }
    }

    /// Fails when anything the agent printed (its logs, and every `replenish-agent` command's output) holds a
    /// token, an authorization code, a PKCE verifier or a device code (code-based linking). Tokens are found by
    /// their LWA prefixes; codes, verifiers and device codes are the exact ones each emulator issued or was
    /// shown. Only booleans reach the expectations, so a failure never prints the secret it found.
    func expectNoSecretsInAgentOutput(sourceLocation: SourceLocation = #_sourceLocation) {
        let output = agentLogs + commandOutputs
        #expect(!agentLogs.isEmpty, sourceLocation: sourceLocation)
        if let setupKey {
            let leakedKey = output.contains(setupKey.hex)
            #expect(!leakedKey, "the setup key reached the agent's output", sourceLocation: sourceLocation)
        }
        for marker in ["Atza|", "Atzr|", "code_verifier", "Bearer "] {
            let leaked = output.contains(marker)
            #expect(!leaked, "\(marker) reached the agent's output", sourceLocation: sourceLocation)
        }
        for emulator in emulators {
            let secrets = try? self.emulator(emulator.base, .get, "/admin/pairing-secrets", caFile: emulator.caFile)
            let codes = secrets?["codes"] as? [String] ?? []
            let verifiers = secrets?["verifiers"] as? [String] ?? []
            let deviceCodes = secrets?["deviceCodes"] as? [String] ?? []
            let leakedDeviceCode = deviceCodes.contains { output.contains($0) }
            #expect(!leakedDeviceCode, "a device code reached the agent's output", sourceLocation: sourceLocation)
            #expect(
                secrets != nil, "the emulator at \(emulator.base) must list its pairing secrets",
                sourceLocation: sourceLocation)
            let leakedCode = codes.contains { output.contains($0) }
            let leakedVerifier = verifiers.contains { output.contains($0) }
            #expect(!leakedCode, "an authorization code reached the agent's output", sourceLocation: sourceLocation)
            #expect(!leakedVerifier, "a PKCE verifier reached the agent's output", sourceLocation: sourceLocation)
        }
    }
}
