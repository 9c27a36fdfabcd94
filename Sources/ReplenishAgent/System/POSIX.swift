#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The agent's boundary with the system calls of files and directories: every `-1`/errno becomes an
/// `AgentError` (code `storage`) naming the operation and the path, with a `SystemError` carrying the errno as
/// its cause; `EINTR` is retried in one helper. State files, the state directory and the token store call
/// these instead of the raw functions; nothing outside `System/` (and the `Gpiod/` boundary) imports the C
/// library. swift-system's `SystemPackage` is in the build graph (through swift-nio) but is not used: it has
/// `open`/`read`/`write`/`stat` and no `fsync`, `rename`, `unlink`, `mkdir`, `chmod`, `flock`, `readdir`,
/// sockets or `getifaddrs`, so it would add a second errno type beside this one rather than replace it.
enum POSIX {
    /// The text of an errno value.
    static func describe(_ error: Int32) -> String { String(cString: strerror(error)) }

    /// Runs `body` again while it fails with EINTR; returns its result (or -1 with errno set).
    @discardableResult
    static func retryingEINTR<T: BinaryInteger>(_ body: () -> T) -> T {
        while true {
            let result = body()
            if result == -1 && errno == EINTR { continue }
            return result
        }
    }

    static func storageError(_ operation: String, _ path: String, _ error: Int32 = errno) -> AgentError {
        AgentError.system(operation, path, errno: error)
    }

    static func renameFile(_ from: String, to: String) throws(AgentError) {
        OffLoop.check("rename", from)
        if rename(from, to) != 0 { throw storageError("rename", from) }
    }

    static func setMode(_ path: String, _ mode: FileMode, _ medium: OffLoop.Medium = .storage) throws(AgentError) {
        OffLoop.check("chmod", path, medium)
        if chmod(path, mode) != 0 { throw storageError("chmod", path) }
    }

    /// `mkdir`; false when something already has that name.
    @discardableResult
    static func makeDirectory(_ path: String, _ mode: FileMode) throws(AgentError) -> Bool {
        OffLoop.check("mkdir", path)
        if mkdir(path, mode) == 0 { return true }
        if errno == EEXIST { return false }
        throw storageError("mkdir", path)
    }

    /// `unlink`; a missing file is not an error. Not made durable (see `removeFile`).
    static func unlinkEntry(_ path: String) throws(AgentError) {
        OffLoop.check("unlink", path)
        if unlink(path) != 0 && errno != ENOENT { throw storageError("unlink", path) }
    }

    /// True when the path names something this process can reach (`access(F_OK)`: a link is followed; an
    /// unreadable parent is "no").
    static func exists(_ path: String, _ medium: OffLoop.Medium = .storage) -> Bool {
        OffLoop.check("access", path, medium)
        return access(path, F_OK) == 0
    }

    /// Why this process cannot add entries to the directory at `path` (`access(W_OK | X_OK)`: a read-only
    /// mount such as a sandbox's says so too), or nil when it can.
    static func cannotWriteIn(_ path: String) -> String? {
        OffLoop.check("access", path)
        return access(path, W_OK | X_OK) == 0 ? nil : describe(errno)
    }

    /// The names in a directory, without `.` and `..`, sorted.
    static func directoryEntries(_ path: String) throws(AgentError) -> [String] {
        OffLoop.check("opendir", path)
        guard let directory = opendir(path) else { throw storageError("opendir", path) }
        defer { closedir(directory) }
        return names(in: directory)
    }

    /// The names a directory stream lists, without `.` and `..`, sorted.
    static func names(in directory: OpaquePointer) -> [String] {
        var names: [String] = []
        while let entry = readdir(directory) {
            // SAFETY: `entry` is readdir's entry, valid until the next readdir/closedir of this stream (both later
            // than this closure); `d_name` is a NUL-terminated array inside it, read only up to its NUL.
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// `stat`, or nil when the path does not exist.
    static func status(_ path: String) throws(AgentError) -> FileInfo? {
        OffLoop.check("stat", path)
        var info = stat()
        if stat(path, &info) == 0 { return FileInfo(info) }
        if errno == ENOENT { return nil }
        throw storageError("stat", path)
    }

    /// `lstat` (a symbolic link is described, not followed), or nil when the path does not exist.
    static func linkStatus(_ path: String) throws(AgentError) -> FileInfo? {
        OffLoop.check("lstat", path)
        var info = stat()
        if lstat(path, &info) == 0 { return FileInfo(info) }
        if errno == ENOENT { return nil }
        throw storageError("lstat", path)
    }

    /// Reads a whole regular file (the config, the board file, the CA file), or nil when it does not exist.
    /// Refuses files over `limit` bytes, and anything but a regular file without reading or waiting: opened
    /// `O_NONBLOCK` (a FIFO with no writer would block `open`, a device `read`) and checked with `fstat` of what
    /// was opened. A symbolic link is followed (the config may be one); what it names is checked.
    static func readFile(_ path: String, limit: Int = 1 << 20, _ medium: OffLoop.Medium = .storage) throws(AgentError)
        -> [UInt8]?
    {
        let file: OpenFile
        do { file = try openFile(path, [.nonBlocking, .noControllingTerminal], medium: medium) } catch {
            if error.systemError?.errno == ENOENT { return nil }
            throw error
        }
        let kind = try file.status().kind
        guard kind == .regular else { throw AgentError(.storage, "\(path) is a \(kind), not a regular file") }
        guard let bytes = try file.readAll(limit: limit) else {
            throw AgentError(.storage, "\(path) is larger than \(limit) bytes")
        }
        return bytes
    }

    /// Writes `bytes` to `path` so that a reader (or a power cut) sees either the old file or the new one,
    /// never a mix: a new temp file with mode 0600, write, fsync, rename over `path`, fsync the directory.
    /// `durable: false` leaves out both fsyncs: for a file on a tmpfs (the runtime directory), which no power
    /// cut can leave half written because none survives one.
    /// `mayRename` is asked just before the rename (false: the write was given up, `DiskLane.write`, and the temp
    /// file goes instead); `renamed` is called once the new file is in place, before the directory's fsync.
    static func writeFileAtomically(
        _ path: String, _ bytes: [UInt8], durable: Bool = true, mayRename: () -> Bool = { true },
        renamed: () -> Void = {}
    ) throws(AgentError) {
        OffLoop.check(durable ? "durable write" : "write", path)
        let directory = parentDirectory(of: path)
        let temp = "\(path).tmp-\(getpid())"
        let fd = retryingEINTR { open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600) }
        if fd < 0 { throw storageError("create", temp) }
        if !writeAll(bytes, to: fd) {
            let error = errno
            // Best effort: the write already failed, and a temp file left behind is removed at the next start.
            close(fd)
            unlink(temp)
            throw storageError("write", temp, error)
        }
        // O_CREAT's mode is filtered by the umask; make sure of 0600 whatever the umask was.
        if fchmod(fd, 0o600) != 0 || (durable && retryingEINTR({ fsync(fd) }) != 0) {
            let error = errno
            close(fd)
            unlink(temp)
            throw storageError("fsync", temp, error)
        }
        // fsync succeeded, so the data is on disk; a close error could add nothing to that.
        close(fd)
        guard mayRename() else {
            unlink(temp)
            throw AgentError(.storage, "\(path) was not written: the write was given up before its rename")
        }
        if rename(temp, path) != 0 {
            let error = errno
            unlink(temp)
            throw storageError("rename", path, error)
        }
        renamed()
        if durable { try syncDirectory(directory) }
    }

    /// Writes all of `bytes` to the descriptor (retrying short writes and EINTR); false on an error, with errno
    /// set, or when the descriptor takes nothing more.
    @discardableResult
    static func writeAll(_ bytes: [UInt8], to descriptor: Int32) -> Bool {
        var written = 0
        while written < bytes.count {
            // SAFETY: the buffer is `bytes`' own storage, alive for the closure; `written < buffer.count`, so the
            // pointer and length stay inside it.
            let count = bytes.withUnsafeBytes { buffer in
                retryingEINTR { write(descriptor, buffer.baseAddress! + written, buffer.count - written) }
            }
            if count <= 0 { return false }
            written += count
        }
        return true
    }

    /// fsyncs a directory so that a rename or unlink in it survives a power cut.
    static func syncDirectory(_ directory: String) throws(AgentError) {
        OffLoop.check("fsync", directory)
        let dfd = retryingEINTR { open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        if dfd < 0 { throw storageError("open", directory) }
        defer { close(dfd) }
        if retryingEINTR({ fsync(dfd) }) != 0 { throw storageError("fsync", directory) }
    }

    /// Proves that files can be made, written, synced and removed in `directory` now (a read-only or full file
    /// system says no), with a probe file that is removed again. A reset asks before it tells DRS anything.
    static func checkWritable(_ directory: String) throws(AgentError) {
        let probe = join(directory, ".write-check")
        try writeFileAtomically(probe, Array("check\n".utf8))
        try removeFile(probe)
    }

    /// Removes a file durably; a missing file is not an error.
    static func removeFile(_ path: String) throws(AgentError) {
        OffLoop.check("unlink", path)
        if unlink(path) != 0 && errno != ENOENT { throw storageError("unlink", path) }
        try syncDirectory(parentDirectory(of: path))
    }

    /// The longest path the agent can bind a unix socket at: 103 bytes. SwiftNIO (`SocketAddress`) refuses
    /// longer paths on every platform (macOS's `sun_path` of 104 less its NUL), although Linux's holds 107.
    static let maximumSocketPathBytes = min(103, MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1)

    static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        return String(path[..<slash])
    }

    /// Joins a directory and a relative path; an absolute `path` stands alone.
    static func join(_ directory: String, _ path: String) -> String {
        if path.hasPrefix("/") { return path }
        return directory.hasSuffix("/") ? directory + path : directory + "/" + path
    }
}
