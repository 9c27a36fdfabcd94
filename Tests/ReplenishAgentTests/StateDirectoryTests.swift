import Foundation
import Synchronization
import Testing

@testable import ReplenishAgent

/// Bad state files (each kind), leftovers of a killed write, the single-agent lock and `check-config`'s
/// owner and mode checks, in-process. The two-process lock test is in `Integration/SingleAgentTests`.
@Suite(.tags(.unit)) struct StateDirectoryTests {
    let tokens = TokenSet(
        clientId: "client", refreshToken: Secret("Atzr|fixture-refresh"), accessToken: Secret("Atza|fixture-access"),
        accessTokenExpiresAt: 1_800_000_000, accessTokenLifetime: 3600)

    func names(_ directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
    }

    /// Loads `name` through its real loader; returns the report (or error) and whether anything was loaded.
    func load(_ name: String, in directory: String) throws -> (report: String?, loaded: Bool) {
        let path = directory + "/" + name
        var reports: [String] = []
        var loaded = false
        switch name {
        case "tokens.json":
            do { loaded = try FileTokenStore(stateDirectory: directory).load() != nil } catch {
                reports.append(error.message)
            }
        case "outbox.json": loaded = try StateFile.load(Outbox.self, from: path) { reports.append($0) } != nil
        default: loaded = try StateFile.load(SubscriptionRecord.self, from: path) { reports.append($0) } != nil
        }
        #expect(reports.count <= 1)
        return (reports.first, loaded)
    }

    /// The bad thing is moved aside with the reason, and the next load finds no file (the agent starts).
    func expectMovedAside(_ name: String, in directory: String, reason: String) throws {
        let (report, loaded) = try load(name, in: directory)
        #expect(!loaded)
        #expect(report?.contains("\(directory)/\(name) \(reason)") == true, "\(report ?? "no report")")
        #expect(report?.contains("moved to \(directory)/\(name).corrupt-") == true, "\(report ?? "no report")")
        #expect(try names(directory).contains { $0.hasPrefix(name + ".corrupt-") })
        #expect(!FileManager.default.fileExists(atPath: directory + "/" + name))
        let again = try load(name, in: directory)
        #expect(again.report == nil && !again.loaded)
    }

    // A FIFO is opened O_NONBLOCK and refused after fstat: the load returns at once. A load that blocks (an open
    // waiting for a writer) fails the test after 10 s, and is then released by opening the FIFO for writing.
    @Test(arguments: StateDirectory.stateFileNames)
    func aFIFOIsMovedAsideWithoutHanging(name: String) throws {
        let directory = temporaryDirectory()
        let path = directory + "/" + name
        #expect(mkfifo(path, 0o600) == 0)
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<(report: String?, loaded: Bool)?>(nil)
        Thread.detachNewThread {
            let result = try? self.load(name, in: directory)
            outcome.withLock { $0 = result }
            done.signal()
        }
        if done.wait(timeout: .now() + 10) == .timedOut {
            Issue.record("loading a FIFO blocked")
            let writer = open(path, O_WRONLY | O_NONBLOCK)
            done.wait()
            close(writer)
            return
        }
        let (report, loaded) = try #require(outcome.withLock { $0 })
        #expect(!loaded)
        #expect(report?.contains("\(path) is not a regular file (a FIFO)") == true, "\(report ?? "no report")")
        #expect(try names(directory).contains { $0.hasPrefix(name + ".corrupt-") })
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test(arguments: StateDirectory.stateFileNames)
    func aDirectoryIsMovedAside(name: String) throws {
        let directory = temporaryDirectory()
        #expect(mkdir(directory + "/" + name, 0o700) == 0)
        try expectMovedAside(name, in: directory, reason: "is not a regular file (a directory)")
    }

    @Test(arguments: StateDirectory.stateFileNames)
    func aSymbolicLinkIsMovedAsideNotFollowed(name: String) async throws {
        let directory = temporaryDirectory()
        // A perfectly good file elsewhere: the link is still not followed out of the state directory.
        let elsewhere = temporaryDirectory()
        try await FileTokenStore(stateDirectory: elsewhere).save(tokens)
        let target = elsewhere + "/tokens.json"
        let before = try Data(contentsOf: URL(fileURLWithPath: target))
        #expect(symlink(target, directory + "/" + name) == 0)
        try expectMovedAside(name, in: directory, reason: "is a symbolic link, not a regular file")
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == before)
    }

    @Test(arguments: StateDirectory.stateFileNames)
    func aFileOverTheLimitIsMovedAside(name: String) throws {
        let directory = temporaryDirectory()
        // Valid JSON, only too large: whitespace before a good body.
        let body = #"{"version":1,"entries":[],"slots":{}}"#
        let size = (name == "tokens.json" ? FileTokenStore.readLimit : StateFile.readLimit) + 1
        let path = directory + "/" + name
        try (String(repeating: " ", count: size) + body).write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o600)
        try expectMovedAside(name, in: directory, reason: "is larger than")
    }

    @Test(.enabled(if: geteuid() == 0, "chown to another uid needs root"), arguments: StateDirectory.stateFileNames)
    func aFileOfAnotherOwnerIsMovedAside(name: String) async throws {
        let directory = temporaryDirectory()
        let path = directory + "/" + name
        switch name {
        case "tokens.json": try await FileTokenStore(stateDirectory: directory).save(tokens)
        case "outbox.json": try DiskLane.saveNow(Outbox(), to: path)
        default: try DiskLane.saveNow(SubscriptionRecord(), to: path)
        }
        #expect(chown(path, 4242, 4242) == 0)
        try expectMovedAside(name, in: directory, reason: "is owned by uid 4242, not the agent's uid \(geteuid())")
    }

    @Test func aMovedAsideFileIsMadePrivateAndNeverOverwritesAnEarlierOne() throws {
        let directory = temporaryDirectory()
        let path = directory + "/outbox.json"
        var asides: [String] = []
        for _ in 0..<3 {
            try "torn".write(toFile: path, atomically: false, encoding: .utf8)
            chmod(path, 0o644)
            asides.append(try StateFile.moveAside(path))
        }
        #expect(Set(asides).count == 3)
        for aside in asides {
            var info = stat()
            #expect(lstat(aside, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o600)
        }
    }

    @Test func openRemovesLeftoverTempFilesOnlyAndTightensOwnFiles() async throws {
        let state = temporaryDirectory() + "/state"
        try StateDirectory.prepare(state)
        let store = FileTokenStore(stateDirectory: state)
        try await store.save(tokens)
        // What a SIGKILL between create and rename leaves behind, next to files that only look alike.
        for name in ["tokens.json.tmp-4242", "outbox.json.tmp-1", "notes.tmp-abc", ".tmp-12", "status.json.tmp-"] {
            try "{\"version\":1,\"torn".write(toFile: state + "/" + name, atomically: false, encoding: .utf8)
            chmod(state + "/" + name, 0o600)
        }
        chmod(state + "/tokens.json", 0o640)
        var reports: [String] = []
        let lock = try StateDirectory.open(state) { reports.append($0) }
        #expect(try names(state) == [".tmp-12", "lock", "notes.tmp-abc", "status.json.tmp-", "tokens.json"])
        #expect(
            reports.contains("state directory: removed \(state)/tokens.json.tmp-4242, left by an interrupted write"))
        #expect(reports.contains("state directory: removed \(state)/outbox.json.tmp-1, left by an interrupted write"))
        #expect(reports.contains("state directory: \(state)/tokens.json had mode 640; set to 600"))
        #expect(reports.count == 3)
        #expect(try store.load() == tokens)
        withExtendedLifetime(lock) {}
    }

    @Test func openDoesNotStopForBadStateFilesTheirLoadersMoveAside() throws {
        let state = temporaryDirectory() + "/state"
        try StateDirectory.prepare(state)
        #expect(mkfifo(state + "/outbox.json", 0o644) == 0)
        #expect(mkdir(state + "/status.json", 0o755) == 0)
        #expect(symlink("/etc/passwd", state + "/tokens.json") == 0)
        var reports: [String] = []
        let lock = try StateDirectory.open(state) { reports.append($0) }
        // Reported once, by the loaders, not here.
        #expect(reports.isEmpty, "\(reports)")
        #expect(try !StateDirectory.problems(state).isEmpty)
        for name in StateDirectory.stateFileNames { #expect(try load(name, in: state).report != nil) }
        withExtendedLifetime(lock) {}
        // Moved aside, nothing check-config complains about is left.
        #expect(try StateDirectory.problems(state) == [])
    }

    @Test func aSecondLockOnTheSameDirectoryIsRefusedWithThePid() throws {
        let state = temporaryDirectory() + "/state"
        var first: StateDirectoryLock? = try StateDirectory.open(state) { _ in }
        #expect(try String(contentsOfFile: state + "/lock", encoding: .utf8).hasPrefix("\(getpid())\n"))
        // flock belongs to an open file description, so a second open in the same process conflicts too.
        do {
            _ = try StateDirectory.open(state) { _ in }
            Issue.record("a second lock must be refused")
        } catch {
            #expect(error.message == "another replenish-agent (pid \(getpid())) is running on \(state)")
        }
        withExtendedLifetime(first) {}
        first = nil
        // Released with its holder (as the kernel releases a killed agent's).
        let second = try StateDirectory.open(state) { _ in }
        #expect(second.path == state + "/lock")
        var info = stat()
        #expect(stat(state + "/lock", &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(try StateDirectory.problems(state) == [])
    }

    /// A command with no answer on the control socket asks whether an agent runs: the lock held, not a pid in
    /// the file (which stays after the agent, perhaps another process's by then); the look leaves no lock.
    @Test func aRunningAgentIsTheLocksHolderNotThePidInTheFile() throws {
        let state = temporaryDirectory() + "/state"
        #expect(StateDirectory.runningAgent(state) == nil)
        var lock: StateDirectoryLock? = try StateDirectory.open(state) { _ in }
        #expect(StateDirectory.runningAgent(state) == getpid())
        // Its run's id (#40.1), which `status` needs to know the running agent's marks as this boot's.
        #expect(lock.map { BootIdentity.isId($0.run) } == true)
        #expect(StateDirectory.runningAgentRun(state) == lock?.run)
        withExtendedLifetime(lock) {}
        lock = nil
        #expect(StateDirectory.runningAgentRun(state) == nil)
        // The pid is still in the file, of a live process (this one): no holder, no agent.
        #expect(try String(contentsOfFile: state + "/lock", encoding: .utf8).hasPrefix("\(getpid())\n"))
        #expect(StateDirectory.runningAgent(state) == nil)
        // The look took nothing: a start still gets the lock.
        _ = try StateDirectory.open(state) { _ in }
    }

    /// The lock file is written over, then cut to its new content (no truncate to nothing first, which on ext4
    /// waits for the journal at every start): a longer file left by another run keeps none of its tail.
    @Test func theLockFileHoldsOnlyThisRunsPidAndIdAfterALongerOne() throws {
        let state = temporaryDirectory() + "/state"
        try StateDirectory.prepare(state)
        let leftover = "999999999\n" + String(repeating: "f", count: 200) + "\nleft over\n"
        try leftover.write(toFile: state + "/lock", atomically: false, encoding: .utf8)
        #expect(chmod(state + "/lock", 0o600) == 0)
        let lock = try StateDirectory.open(state) { _ in }
        #expect(try String(contentsOfFile: state + "/lock", encoding: .utf8) == "\(getpid())\n\(lock.run)\n")
        #expect(StateDirectory.runningAgentRun(state) == lock.run)
    }

    @Test func aLockNameTakenByADirectoryIsMovedAsideAndTheLockTaken() throws {
        let state = temporaryDirectory() + "/state"
        try StateDirectory.prepare(state)
        #expect(mkdir(state + "/lock", 0o700) == 0)
        let lock = try StateDirectory.open(state) { _ in }
        var info = stat()
        #expect(lstat(lock.path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG)
        #expect(try names(state).contains { $0.hasPrefix("lock.corrupt-") })
    }

    /// System calls fail with a typed cause: the operation, the path and the errno, not only a message.
    @Test func systemCallFailuresCarryTheErrno() throws {
        let directory = temporaryDirectory()
        let missing = directory + "/missing/file"
        func cause(_ body: () throws -> Void) -> SystemError? {
            do {
                try body()
                return nil
            } catch let error as AgentError {
                return error.code == .storage ? error.systemError : nil
            } catch { return nil }
        }
        #expect(
            cause { _ = try POSIX.openFile(missing) }
                == SystemError("open", path: missing, errno: ENOENT))
        #expect(cause { try POSIX.setMode(missing, 0o600) } == SystemError("chmod", path: missing, errno: ENOENT))
        #expect(
            cause { try POSIX.renameFile(missing, to: directory + "/x") }
                == SystemError("rename", path: missing, errno: ENOENT))
        #expect(cause { try POSIX.makeDirectory(missing, 0o700) } == SystemError("mkdir", path: missing, errno: ENOENT))
        #expect(
            cause { try POSIX.writeFileAtomically(missing, [1]) }
                == SystemError("create", path: missing + ".tmp-\(getpid())", errno: ENOENT))
        // A directory opened for reading fails at read with EISDIR (`readFile` refuses it before reading).
        #expect(
            cause { _ = try POSIX.openFile(directory).readAll(limit: 1) }
                == SystemError("read", path: directory, errno: EISDIR))
        // The message is the one the logs always had.
        #expect(
            AgentError.system("open", missing, errno: ENOENT).message == "open \(missing): No such file or directory")
        #expect(try POSIX.makeDirectory(directory, 0o700) == false)
    }

    @Test func checkConfigReportsOwnersOfTheStateDirectoryAndItsFiles() async throws {
        guard geteuid() == 0 else { return }  // chown needs root
        let state = temporaryDirectory() + "/state"
        try StateDirectory.prepare(state)
        try await FileTokenStore(stateDirectory: state).save(tokens)
        #expect(chown(state + "/tokens.json", 4242, 4242) == 0)
        #expect(
            try StateDirectory.problems(state, agentUID: 0) == [
                "stateDirectory: \(state)/tokens.json is owned by uid 4242, not the agent's uid 0"
            ])
        #expect(
            try StateDirectory.problems(state, agentUID: 4242) == [
                "stateDirectory: \(state) is owned by uid 0, not the agent's uid 4242"
            ])
        // Checked from a root shell: the agent's uid is the state directory's owner.
        #expect(chown(state, 4242, 4242) == 0)
        #expect(try StateDirectory.problems(state) == [])
        #expect(StateDirectory.agentUID(state) == 4242)
    }

    @Test func checkConfigRefusesAClientSecretOthersCanRead() throws {
        let directory = temporaryDirectory()
        let board = packageRoot() + "/board/simulated.json"
        let path = directory + "/agent.json"
        func write(secret: Bool) throws -> AgentConfig {
            let text = """
                {"device":{"serial":"TEST0001","model":"model-1","phase":"test"},
                 "lwa":{"clientId":"amzn1.application-oa2-client.x","tokenURL":"https://api.amazon.com/auth/o2/token"\(secret ? #","clientSecret":"fixture-secret""# : "")},
                 "drs":{"baseURL":"https://dash-replenishment-service-na.amazon.com"},
                 "stateDirectory":"\(directory)/state","board":"\(board)",
                 "buttons":[{"input":"button","slot":"slot-1"}],"pairing":{"listen":"127.0.0.1:8642"}}
                """
            try text.write(toFile: path, atomically: false, encoding: .utf8)
            return try AgentConfig.load(path: path)
        }
        let uid = geteuid()
        var config = try write(secret: true)
        chmod(path, 0o644)
        #expect(
            CheckConfigCommand.secretFileProblems(path, config: config, agentUID: uid) == [
                "\(path): holds lwa.clientSecret and is readable by others (mode 644); chmod o-rwx (for example 640, owner root, group of the agent)"
            ])
        chmod(path, 0o640)
        #expect(CheckConfigCommand.secretFileProblems(path, config: config, agentUID: uid) == [])
        #expect(CheckConfigCommand.fileProblems(configPath: path, config: config) == ([], []))
        // Without a secret, the mode of the config is not a problem.
        config = try write(secret: false)
        chmod(path, 0o644)
        #expect(CheckConfigCommand.secretFileProblems(path, config: config, agentUID: uid) == [])
        if geteuid() == 0 {
            config = try write(secret: true)
            chmod(path, 0o600)
            #expect(chown(path, 4242, 4242) == 0)
            #expect(
                CheckConfigCommand.secretFileProblems(path, config: config, agentUID: 999) == [
                    "\(path): holds lwa.clientSecret and is owned by uid 4242; it must be owned by root or the agent's uid 999"
                ])
            #expect(CheckConfigCommand.secretFileProblems(path, config: config, agentUID: 4242) == [])
        }
    }
}
