import FoundationEssentials

/// Reading and writing the agent's JSON state files (tokens, outbox, status) under the state directory.
///
/// Nothing in a state file is trusted: it is opened without following a symbolic link and without blocking
/// (a FIFO never hangs the agent), and read only when `fstat` of that descriptor shows a regular file owned by
/// the agent's uid and within the size limit; its `version` follows `StateFormat`'s rule. A file that fails any
/// of these is moved aside (`NAME.corrupt-<time>`) with the reason, never deleted and never a reason not to
/// start. Each file is read and written through its store (`StateStore`), which applies these rules; writes replace
/// the file atomically (`POSIX.writeFileAtomically`), on the disk lane (`DiskLane`) once the daemon serves.
enum StateFile {
    /// No state file the agent writes comes near this (an outbox holds a few slots).
    static let readLimit = 4 << 20

    /// What reading a state file found.
    enum Reading<Value> {
        case missing
        case read(Value)
        /// The file cannot be used; `reason` completes the sentence "<path> …" and holds no content of the file.
        case unusable(reason: String)
    }

    /// The one field every state file has, read before the rest.
    private struct VersionProbe: Decodable { var version: Int? }

    /// Why a file's bytes are not a state of type `T`.
    struct FormatProblem: Error {
        var reason: String
    }

    /// Applies `StateFormat`'s rule to the bytes of a file.
    static func decode<T: StateFormat>(_ type: T.Type, from bytes: [UInt8]) -> Result<T, FormatProblem> {
        let data = Data(bytes)
        guard let probe = try? JSONDecoder().decode(VersionProbe.self, from: data) else {
            return .failure(FormatProblem(reason: "is not a JSON object with a format version"))
        }
        guard let version = probe.version else { return .failure(FormatProblem(reason: "has no format version")) }
        let readable = T.readableVersions
        guard readable.contains(version) else {
            return .failure(
                FormatProblem(
                    reason:
                        "has format version \(version), which this build cannot read (it reads \(readable.lowerBound) to \(readable.upperBound))"
                ))
        }
        // The decoder's own message is not passed on: it may quote a value, and a value may be a token.
        guard var value = try? JSONDecoder().decode(T.self, from: data) else {
            return .failure(FormatProblem(reason: "cannot be read as a version \(version) file"))
        }
        value.version = T.formatVersion
        return .success(value)
    }

    /// The bytes of a state file, or why it cannot be used: a symbolic link, not a regular file, owned by another
    /// uid, over `limit` bytes, or not openable for its permissions. Other failures (no descriptors left, an I/O
    /// error) are thrown: they say nothing about the file, so it is not moved aside for them.
    static func readBytes(
        _ path: String, limit: Int, owner: UserID = POSIX.effectiveUserID(), on lane: borrowing DiskLane.Context
    ) throws(AgentError) -> Reading<[UInt8]> {
        // `.untrusted`: a symbolic link fails (O_NOFOLLOW) instead of being followed out of the state directory,
        // and a FIFO opens at once (O_NONBLOCK) instead of waiting for a writer.
        let file: POSIX.OpenFile
        do { file = try POSIX.openFile(path, .untrusted) } catch {
            switch error.systemError?.errno {
            case Errno.noSuchFile: return .missing
            case Errno.symbolicLink: return .unusable(reason: "is a symbolic link, not a regular file")
            case Errno.noDeviceOrAddress, Errno.noDevice:
                return .unusable(reason: "is not a regular file (a socket or a device)")
            case let code? where code == Errno.permissionDenied || code == Errno.notPermitted:
                // Another owner's file the agent may not read is that owner's, not a state file. When the path
                // itself cannot be looked at (`status` run by another user), that is thrown: the file may be fine.
                guard let info = try POSIX.linkStatus(path) else { return .missing }
                if info.owner != owner {
                    return .unusable(reason: "is owned by uid \(info.owner), not the agent's uid \(owner)")
                }
                return .unusable(reason: "cannot be opened: \(POSIX.describe(code))")
            default: throw error
            }
        }
        let info = try file.status()
        if info.kind != .regular { return .unusable(reason: "is not a regular file (a \(info.kind))") }
        if info.owner != owner {
            return .unusable(reason: "is owned by uid \(info.owner), not the agent's uid \(owner)")
        }
        if info.size > limit { return .unusable(reason: "is larger than \(limit) bytes (\(info.size))") }
        // nil: the file grew past the limit while being read.
        guard let bytes = try file.readAll(limit: limit) else {
            return .unusable(reason: "is larger than \(limit) bytes")
        }
        return .read(bytes)
    }

    /// Renames `path` to `path.corrupt-<epoch seconds>` (with a `-N` suffix when that name is taken) and returns
    /// the new name. A regular file of the agent's own gets mode 0600 (it may hold tokens); anything else is
    /// left as it is, inside the 0700 state directory.
    static func moveAside(_ path: String, on lane: borrowing DiskLane.Context) throws(AgentError) -> String {
        let base = "\(path).corrupt-\(Int(POSIX.wallTime()))"
        var aside = base
        var suffix = 1
        while try POSIX.linkStatus(aside) != nil {
            suffix += 1
            aside = "\(base)-\(suffix)"
        }
        if let info = try POSIX.linkStatus(path), info.kind == .regular, info.owner == POSIX.effectiveUserID(),
            info.isReachableByOthers
        {
            try POSIX.setMode(path, 0o600)
        }
        try POSIX.renameFile(path, to: aside)
        try POSIX.syncDirectory(POSIX.parentDirectory(of: path))
        return aside
    }
}
