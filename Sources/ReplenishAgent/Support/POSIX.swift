#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Small helpers over the POSIX calls the agent makes; `-1`/errno becomes an `AgentError` naming the
/// operation and the path.
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
        AgentError(.storage, "\(operation) \(path): \(describe(error))")
    }

    /// `stat`, or nil when the path does not exist.
    static func status(_ path: String) throws(AgentError) -> stat? {
        var info = stat()
        if stat(path, &info) == 0 { return info }
        if errno == ENOENT { return nil }
        throw storageError("stat", path)
    }

    /// Reads a whole file, or nil when it does not exist. Refuses files over `limit` bytes.
    static func readFile(_ path: String, limit: Int = 1 << 20) throws(AgentError) -> [UInt8]? {
        let fd = retryingEINTR { open(path, O_RDONLY | O_CLOEXEC) }
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw storageError("open", path)
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { buffer in
                retryingEINTR { read(fd, buffer.baseAddress, buffer.count) }
            }
            if count < 0 { throw storageError("read", path) }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<count])
            if bytes.count > limit { throw AgentError(.storage, "\(path) is larger than \(limit) bytes") }
        }
    }

    /// Writes `bytes` to `path` so that a reader (or a power cut) sees either the old file or the new one,
    /// never a mix: a new temp file with mode 0600, write, fsync, rename over `path`, fsync the directory.
    static func writeFileAtomically(_ path: String, _ bytes: [UInt8]) throws(AgentError) {
        let directory = parentDirectory(of: path)
        let temp = "\(path).tmp-\(getpid())"
        let fd = retryingEINTR { open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600) }
        if fd < 0 { throw storageError("create", temp) }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { buffer in
                retryingEINTR { write(fd, buffer.baseAddress! + written, buffer.count - written) }
            }
            if count < 0 {
                let error = errno
                close(fd)
                unlink(temp)
                throw storageError("write", temp, error)
            }
            written += count
        }
        // O_CREAT's mode is filtered by the umask; make sure of 0600 whatever the umask was.
        if fchmod(fd, 0o600) != 0 || retryingEINTR({ fsync(fd) }) != 0 {
            let error = errno
            close(fd)
            unlink(temp)
            throw storageError("fsync", temp, error)
        }
        close(fd)
        if rename(temp, path) != 0 {
            let error = errno
            unlink(temp)
            throw storageError("rename", path, error)
        }
        try syncDirectory(directory)
    }

    /// fsyncs a directory so that a rename or unlink in it survives a power cut.
    static func syncDirectory(_ directory: String) throws(AgentError) {
        let dfd = retryingEINTR { open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        if dfd < 0 { throw storageError("open", directory) }
        defer { close(dfd) }
        if retryingEINTR({ fsync(dfd) }) != 0 { throw storageError("fsync", directory) }
    }

    /// Removes a file durably; a missing file is not an error.
    static func removeFile(_ path: String) throws(AgentError) {
        if unlink(path) != 0 && errno != ENOENT { throw storageError("unlink", path) }
        try syncDirectory(parentDirectory(of: path))
    }

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

    /// Unblocks every signal in this thread. A process started by a test runner (or any parent) may inherit
    /// a blocked mask, and then SIGTERM would never reach it.
    static func unblockAllSignals() {
        var set = sigset_t()
        sigemptyset(&set)
        sigprocmask(SIG_SETMASK, &set, nil)
    }

    /// Sets RLIMIT_CORE to 0 (soft and hard), so no core file of this process can ever be written.
    static func disableCoreDumps() {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
    }

    /// Seconds since the Unix epoch (wall clock): used only for absolute expiries and timestamps that must
    /// survive a restart. Waits use a monotonic `Clock`.
    static func wallTime() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}
