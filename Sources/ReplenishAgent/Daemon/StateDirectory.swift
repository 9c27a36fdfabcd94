/// The state directory holds the tokens, the outbox, the subscriptions file (`status.json`) and the control socket:
/// mode 0700, owned by the agent's user, every file in it 0600. `run` opens it with `open(_:report:)`: created when
/// missing, refused when others can reach it, locked for one agent, swept of what a killed agent left.
enum StateDirectory {
    /// The state files, each read by its own loader through `StateFile`.
    static let stateFileNames = ["tokens.json", "outbox.json", "status.json"]
    /// The lock file `run` holds (`flock`) for its whole life; it records the holder's pid.
    static let lockFileName = "lock"
    /// The daemon's control socket (`ControlServer`), bound anew at each start.
    static let controlSocketName = "control.sock"

    /// The control socket's path in the state directory at `path`.
    static func controlSocketPath(_ path: String) -> String { POSIX.join(path, controlSocketName) }

    /// Prepares the directory for `run`, before any state is read: creates and checks it (`prepare`), takes the
    /// lock (a second agent on the same directory stops here with the holder's pid), sweeps it (`sweep`) and
    /// finishes the wipe of a reset that was cut short (`ResetWipe`).
    /// The lock lasts as long as the returned value.
    static func open(_ path: String, on lane: borrowing DiskLane.Context, report: (String) -> Void) throws(AgentError)
        -> StateDirectoryLock
    {
        try prepare(path)
        let lock = try self.lock(path, on: lane)
        try sweep(path, on: lane, report: report)
        // A reset cut short is finished before anything reads the state it was wiping.
        try ResetWipe.finishInterrupted(stateDirectory: path, on: lane, report: report)
        return lock
    }

    /// Creates the directory (0700) when missing; then checks the directory itself (mode and owner). These
    /// problems stop the agent: with them, the tokens are not private. A path too long for the control socket
    /// stops it before anything is created (`socketPathProblems`).
    static func prepare(_ path: String) throws(AgentError) {
        if let tooLong = socketPathProblems(path).first { throw AgentError(.configuration, tooLong) }
        if try POSIX.status(path) == nil {
            let parent = POSIX.parentDirectory(of: path)
            if parent != path, try POSIX.status(parent) == nil {
                // Parents are ordinary directories (0755); only the state directory itself is private.
                try createParents(parent)
            }
            try POSIX.makeDirectory(path, 0o700)
            // mkdir's mode is filtered by the umask; set exactly 0700.
            try POSIX.setMode(path, 0o700)
        }
        let problems = try directoryProblems(path, agentUID: POSIX.effectiveUserID())
        if let first = problems.first { throw AgentError(.storage, first) }
    }

    /// The control socket's path must fit a unix socket address (`POSIX.maximumSocketPathBytes`, 103 bytes), or
    /// no start could bind it: a config error, named with its limit, before any start (`check-config`) and at
    /// `run`'s first step. Checked on the path as written, as the socket is bound.
    static func socketPathProblems(_ path: String) -> [String] {
        let socket = controlSocketPath(path)
        let limit = POSIX.maximumSocketPathBytes
        guard socket.utf8.count > limit else { return [] }
        return [
            "stateDirectory: \(path) is too long for the control socket: \(socket) is \(socket.utf8.count) bytes, and a unix socket path holds at most \(limit) bytes; choose a stateDirectory of at most \(limit - socket.utf8.count + path.utf8.count) bytes"
        ]
    }

    private static func createParents(_ path: String) throws(AgentError) {
        let parent = POSIX.parentDirectory(of: path)
        if parent != path, try POSIX.status(parent) == nil { try createParents(parent) }
        try POSIX.makeDirectory(path, 0o755)
    }

    /// Takes the state directory's lock without waiting: `flock` on `<path>/lock`, opened `O_CLOEXEC` so no
    /// child inherits it. The kernel drops the lock when the process ends, however it ends, so a killed agent
    /// never leaves a stale lock. A lock file that is not a regular file is moved aside once and made anew.
    static func lock(_ path: String, on lane: borrowing DiskLane.Context) throws(AgentError) -> StateDirectoryLock {
        let name = POSIX.join(path, lockFileName)
        let file: POSIX.OpenFile
        if let opened = try openLockFile(name) {
            file = opened
        } else {
            let aside = try StateFile.moveAside(name, on: lane)
            guard let opened = try openLockFile(name) else {
                throw AgentError(.storage, "\(name) cannot be made a regular file (the old one is \(aside))")
            }
            file = opened
        }
        guard try file.tryLock() else {
            let holder = (try? file.readPrefix(32)).flatMap {
                Int(String(decoding: $0, as: UTF8.self).split(separator: "\n").first ?? "")
            }
            throw AgentError(
                .storage, "another replenish-agent (pid \(holder.map(String.init) ?? "unknown")) is running on \(path)")
        }
        // The pid is only for the message above: the lock itself is the flock, not the file's content. The run's
        // id (`AgentRun`) is for `status`, which reads it while the lock is held.
        let run = BootIdentity.randomId()
        try file.replaceContents(Array("\(POSIX.processID())\n\(run)\n".utf8))
        return StateDirectoryLock(file: file, run: run)
    }

    /// Whether an agent holds the lock on the state directory at `path`, and its pid as the lock file records it
    /// (0 when unreadable); nil when no process holds the lock. Only for messages: a command that got no answer
    /// on the control socket says whether an agent runs. The look is a `flock` without waiting on a descriptor
    /// of its own, released at once when it succeeds (no agent): the same instant's race with a starting agent
    /// as the command's own lock, which it takes next, always had. A pid in the file is never trusted alone: it
    /// stays after the agent ends, and may by then be another process's.
    static func runningAgent(_ path: String) -> Int32? { runningAgentLock(path)?.pid }

    /// The run id (`AgentRun.id`) of the agent holding the lock on the state directory at `path`; nil when none
    /// runs or its lock file names none (an earlier build's).
    static func runningAgentRun(_ path: String) -> String? { runningAgentLock(path)?.run }

    private static func runningAgentLock(_ path: String) -> (pid: Int32, run: String?)? {
        guard let file = try? POSIX.openFile(POSIX.join(path, lockFileName), .untrusted),
            (try? file.status().kind) == .regular, let locked = try? file.tryLock()
        else { return nil }
        if locked {
            file.unlock()
            return nil
        }
        let lines = String(decoding: (try? file.readPrefix(128)) ?? [], as: UTF8.self).split(separator: "\n")
        let run = lines.dropFirst().first.map(String.init).flatMap { BootIdentity.isId($0) ? $0 : nil }
        return (Int32(lines.first ?? "") ?? 0, run)
    }

    /// Opens (creating, 0600) the lock file; nil when the name is taken by something that is not a regular file.
    private static func openLockFile(_ name: String) throws(AgentError) -> POSIX.OpenFile? {
        let file: POSIX.OpenFile
        do {
            file = try POSIX.openFile(name, [.readWrite, .create, .noFollow, .nonBlocking], mode: 0o600)
        } catch {
            let notAFile = [Errno.symbolicLink, Errno.isDirectory, Errno.noDeviceOrAddress, Errno.noDevice]
            if let code = error.systemError?.errno, notAFile.contains(code) { return nil }
            throw error
        }
        return try file.status().kind == .regular ? file : nil
    }

    /// What a killed agent or a careless hand may have left, dealt with under the lock before any state is read:
    /// temp files of an interrupted write (`NAME.tmp-<pid>`) are removed; a regular file of the agent's own with
    /// another mode than 0600 (group or other bits, or one the agent cannot read) is set to 0600; anything else
    /// odd (another owner, not a regular file) is reported and left, except the state files themselves, whose
    /// loaders move a bad one aside with the reason. Nothing here stops the agent: a restart could not fix it.
    static func sweep(_ path: String, on lane: borrowing DiskLane.Context, report: (String) -> Void) throws(AgentError)
    {
        // The directory is synced only when the sweep changed an entry in it (a start with nothing to sweep, the
        // usual one, waits for no fsync before it serves); a move aside syncs its own.
        var changed = false
        for name in try POSIX.directoryEntries(path) {
            let file = POSIX.join(path, name)
            guard let info = try POSIX.linkStatus(file) else { continue }
            let kind = info.kind
            if isTempFile(name) {
                do {
                    try POSIX.unlinkEntry(file)
                    changed = true
                    report("state directory: removed \(file), left by an interrupted write")
                } catch { report("state directory: cannot remove \(file): \(error.message)") }
                continue
            }
            // The control socket's name taken by anything but a socket (a file, a directory, a FIFO) would fail
            // every start at bind: moved aside like a bad state file.
            if name == controlSocketName && kind != .socket {
                do {
                    let aside = try StateFile.moveAside(file, on: lane)
                    report("state directory: \(file) is a \(kind), not a socket; it was moved to \(aside)")
                } catch { report("state directory: \(file) is a \(kind), not a socket: \(error.message)") }
                continue
            }
            // Sockets are bound anew at each start; a moved-aside copy was reported when it was moved.
            if kind == .socket || isMovedAside(name) || stateFileNames.contains(name) && kind != .regular { continue }
            let agentUID = POSIX.effectiveUserID()
            if kind != .regular {
                report("state directory: \(file) is a \(kind), not a regular file")
            } else if info.owner != agentUID {
                if !stateFileNames.contains(name) {
                    report("state directory: \(file) is owned by uid \(info.owner), not the agent's uid \(agentUID)")
                }
            } else if info.permissions & 0o777 != 0o600 {
                do {
                    try POSIX.setMode(file, 0o600)
                    changed = true
                    report("state directory: \(file) had mode \(info.octalPermissions); set to 600")
                } catch { report("state directory: \(file) has mode \(info.octalPermissions): \(error.message)") }
            }
        }
        if changed { try POSIX.syncDirectory(path) }
    }

    /// The system user the package makes for the agent, and its unit runs as.
    static let packageUser = "replenish"

    /// The uid that must own the agent's private files outside the state directory (the setup key): this
    /// process's when it is not root; from a root shell, the state directory's owner (systemd makes it for the
    /// agent's user), or nil before it exists (a factory shell before the first start: nothing to compare with;
    /// the agent's own start then finds a key it cannot read or does not own).
    static func expectedAgentUID(_ stateDirectory: String?) -> UserID? {
        let own = POSIX.effectiveUserID()
        if own != 0 { return own }
        guard let stateDirectory, let info = (try? POSIX.status(stateDirectory)) ?? nil else { return nil }
        return info.owner
    }

    /// The agent's uid as a command that does not run as the agent can know it: its own, or, when a root shell
    /// runs it, the owner of the state directory (systemd creates that for the agent's user); root when there is
    /// no state directory yet.
    static func agentUID(_ path: String) -> UserID {
        let own = POSIX.effectiveUserID()
        if own != 0 { return own }
        return (try? POSIX.status(path))??.owner ?? 0
    }

    /// Every problem of the directory and its files, one line each naming the file; empty when all is well or
    /// when the directory does not exist yet (`run` will create it). The agent's uid is `agentUID`, by default
    /// this process's (when checked as root, the state directory's owner: a root shell checking an agent that
    /// runs as its own user).
    static func problems(_ path: String, agentUID: UserID? = nil) throws(AgentError) -> [String] {
        let uid = agentUID ?? self.agentUID(path)
        return try directoryProblems(path, agentUID: uid) + fileProblems(path, agentUID: uid)
    }

    /// The problems of the files in the directory (kind, owner, mode), one line each naming the file. None of
    /// them stops `run`: it moves a bad state file aside, sets its own files to 0600 and logs the rest.
    static func fileProblems(_ path: String, agentUID uid: UserID) throws(AgentError) -> [String] {
        guard let info = try POSIX.status(path), info.kind == .directory else { return [] }
        var problems: [String] = []
        for name in try POSIX.directoryEntries(path) where !isMovedAside(name) {
            let file = POSIX.join(path, name)
            guard let fileInfo = try POSIX.linkStatus(file) else { continue }
            // A socket (the simulated board's control socket) is removed and bound anew at every start, so a
            // stale one's mode says nothing; files hold the secrets.
            if fileInfo.kind == .socket { continue }
            if name == controlSocketName {
                problems.append(
                    "stateDirectory: \(file) is a \(fileInfo.kind), not a socket (run moves it aside and binds its socket)"
                )
                continue
            }
            if fileInfo.kind != .regular {
                problems.append(
                    "stateDirectory: \(file) is a \(fileInfo.kind), not a regular file (run moves a bad state file aside)"
                )
                continue
            }
            if fileInfo.owner != uid {
                problems.append(
                    "stateDirectory: \(file) is owned by uid \(fileInfo.owner), not the agent's uid \(uid)")
            }
            if fileInfo.isReachableByOthers {
                problems.append("stateDirectory: \(file) has mode \(fileInfo.octalPermissions); it must be 600")
            }
        }
        return problems
    }

    /// The problems of the directory itself: not a directory, group or others have access, another owner.
    static func directoryProblems(_ path: String, agentUID: UserID) throws(AgentError) -> [String] {
        guard let info = try POSIX.status(path) else { return [] }
        guard info.kind == .directory else { return ["stateDirectory: \(path) is not a directory"] }
        var problems: [String] = []
        if info.isReachableByOthers {
            problems.append(
                "stateDirectory: \(path) has mode \(info.octalPermissions); group and others must have no access (chmod 700)"
            )
        }
        if info.owner != agentUID {
            problems.append("stateDirectory: \(path) is owned by uid \(info.owner), not the agent's uid \(agentUID)")
        }
        return problems
    }

    /// `NAME.tmp-<pid>`, as `POSIX.writeFileAtomically` names its temp files.
    static func isTempFile(_ name: String) -> Bool {
        guard let range = name.occurrences(of: ".tmp-").last else { return false }
        let pid = name[range.upperBound...]
        return range.lowerBound != name.startIndex && !pid.isEmpty && pid.allSatisfy(\.isASCIIDigit)
    }

    /// `NAME.corrupt-<time>[-N]`, as `StateFile.moveAside` names what it moves.
    static func isMovedAside(_ name: String) -> Bool { name.containsText(".corrupt-") }
}

/// The held lock of a state directory (see `StateDirectory.lock`); released when this value goes.
final class StateDirectoryLock: Sendable {
    private let file: POSIX.OpenFile
    /// This run's id (`AgentRun.id`), recorded in the lock file.
    let run: String

    init(file: POSIX.OpenFile, run: String) {
        self.file = file
        self.run = run
    }

    /// Released explicitly before the close (see `OpenFile.unlock`): a restart in the same process, or a look by
    /// `runningAgent`, finds it free at once.
    deinit { file.unlock() }

    /// The lock file's path.
    var path: String { file.path }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
