#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The agent's boundary with the system calls of files and directories: every `-1`/errno becomes an
/// `AgentError` (code `storage`) naming the operation and the path, with a `SystemError` carrying the errno as
/// its cause; `EINTR` is retried in one helper. State files, the state directory and the token store call
/// these instead of the raw functions.
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

    /// An open file descriptor, closed when this value goes (a `close` error on a descriptor only read from or
    /// locked says nothing the caller could act on; writes are made durable with `fsync` before).
    final class OpenFile: Sendable {
        let path: String
        let descriptor: Int32

        fileprivate init(path: String, descriptor: Int32) {
            self.path = path
            self.descriptor = descriptor
        }

        deinit { close(descriptor) }

        /// `fstat` of the descriptor: what was opened, not what the path names now.
        func status() throws(AgentError) -> stat {
            var info = stat()
            if fstat(descriptor, &info) != 0 { throw storageError("fstat", path) }
            return info
        }

        /// Reads to the end; nil when there is more than `limit` bytes.
        func readAll(limit: Int) throws(AgentError) -> [UInt8]? {
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                let count = chunk.withUnsafeMutableBytes { buffer in
                    retryingEINTR { read(descriptor, buffer.baseAddress, buffer.count) }
                }
                if count < 0 { throw storageError("read", path) }
                if count == 0 { return bytes }
                bytes.append(contentsOf: chunk[0..<count])
                if bytes.count > limit { return nil }
            }
        }

        /// Up to `count` bytes from the start of the file (without moving the offset).
        func readPrefix(_ count: Int) throws(AgentError) -> [UInt8] {
            var buffer = [UInt8](repeating: 0, count: count)
            let read = buffer.withUnsafeMutableBytes { raw in
                retryingEINTR { pread(descriptor, raw.baseAddress, raw.count, 0) }
            }
            if read < 0 { throw storageError("read", path) }
            return Array(buffer[0..<read])
        }

        /// Makes `bytes` the whole content of the file (truncate, then write at offset 0).
        func replaceContents(_ bytes: [UInt8]) throws(AgentError) {
            if retryingEINTR({ ftruncate(descriptor, 0) }) != 0 { throw storageError("ftruncate", path) }
            var written = 0
            while written < bytes.count {
                let count = bytes.withUnsafeBytes { buffer in
                    retryingEINTR {
                        pwrite(descriptor, buffer.baseAddress! + written, buffer.count - written, off_t(written))
                    }
                }
                if count < 0 { throw storageError("write", path) }
                written += count
            }
        }

        /// Takes an exclusive `flock` without waiting: false when another open file description holds one.
        func tryLock() throws(AgentError) -> Bool {
            if retryingEINTR({ flock(descriptor, LOCK_EX | LOCK_NB) }) == 0 { return true }
            if errno == EWOULDBLOCK { return false }
            throw storageError("flock", path)
        }
    }

    /// `open(2)` with `flags` (add `O_CLOEXEC`); the error's `systemError` carries the errno (`ENOENT`, …).
    static func openFile(_ path: String, _ flags: Int32, mode: mode_t = 0) throws(AgentError) -> OpenFile {
        let fd = retryingEINTR { open(path, flags, mode) }
        if fd < 0 { throw storageError("open", path) }
        return OpenFile(path: path, descriptor: fd)
    }

    static func renameFile(_ from: String, to: String) throws(AgentError) {
        if rename(from, to) != 0 { throw storageError("rename", from) }
    }

    static func setMode(_ path: String, _ mode: mode_t) throws(AgentError) {
        if chmod(path, mode) != 0 { throw storageError("chmod", path) }
    }

    /// `mkdir`; false when something already has that name.
    @discardableResult
    static func makeDirectory(_ path: String, _ mode: mode_t) throws(AgentError) -> Bool {
        if mkdir(path, mode) == 0 { return true }
        if errno == EEXIST { return false }
        throw storageError("mkdir", path)
    }

    /// `unlink`; a missing file is not an error. Not made durable (see `removeFile`).
    static func unlinkEntry(_ path: String) throws(AgentError) {
        if unlink(path) != 0 && errno != ENOENT { throw storageError("unlink", path) }
    }

    /// The names in a directory, without `.` and `..`, sorted.
    static func directoryEntries(_ path: String) throws(AgentError) -> [String] {
        guard let directory = opendir(path) else { throw storageError("opendir", path) }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// `stat`, or nil when the path does not exist.
    static func status(_ path: String) throws(AgentError) -> stat? {
        var info = stat()
        if stat(path, &info) == 0 { return info }
        if errno == ENOENT { return nil }
        throw storageError("stat", path)
    }

    /// `lstat` (a symbolic link is described, not followed), or nil when the path does not exist.
    static func linkStatus(_ path: String) throws(AgentError) -> stat? {
        var info = stat()
        if lstat(path, &info) == 0 { return info }
        if errno == ENOENT { return nil }
        throw storageError("lstat", path)
    }

    /// What a `st_mode` names, in words for a log line.
    static func fileKind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFREG: "regular file"
        case S_IFDIR: "directory"
        case S_IFLNK: "symbolic link"
        case S_IFIFO: "FIFO"
        case S_IFSOCK: "socket"
        case S_IFCHR: "character device"
        case S_IFBLK: "block device"
        default: "file of type \(String(mode & S_IFMT, radix: 8))"
        }
    }

    /// Reads a whole file, or nil when it does not exist. Refuses files over `limit` bytes.
    static func readFile(_ path: String, limit: Int = 1 << 20) throws(AgentError) -> [UInt8]? {
        let file: OpenFile
        do { file = try openFile(path, O_RDONLY | O_CLOEXEC) } catch {
            if error.systemError?.errno == ENOENT { return nil }
            throw error
        }
        guard let bytes = try file.readAll(limit: limit) else {
            throw AgentError(.storage, "\(path) is larger than \(limit) bytes")
        }
        return bytes
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
                // Best effort: the write already failed, and a temp file left behind is removed at the next start.
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
        // fsync succeeded, so the data is on disk; a close error could add nothing to that.
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

    /// Overwrites a regular file with zeros (fsync-ed) and removes it durably, so its secrets do not stay in
    /// the freed blocks where the file system writes in place (ext4; a flash translation layer may still keep
    /// old copies). A missing file is not an error; a link is removed, never followed.
    static func shred(_ path: String) throws(AgentError) {
        let fd = retryingEINTR { open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        if fd >= 0 {
            defer { close(fd) }
            var info = stat()
            if fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size > 0 {
                let zeros = [UInt8](repeating: 0, count: 16 * 1024)
                var left = Int(info.st_size)
                while left > 0 {
                    let count = zeros.withUnsafeBytes { buffer in
                        retryingEINTR { write(fd, buffer.baseAddress, min(left, buffer.count)) }
                    }
                    if count <= 0 { throw storageError("overwrite", path) }
                    left -= count
                }
                if retryingEINTR({ fsync(fd) }) != 0 { throw storageError("fsync", path) }
            }
        }
        try removeFile(path)
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
