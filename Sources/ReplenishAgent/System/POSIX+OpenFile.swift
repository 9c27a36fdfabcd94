#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension POSIX {
    /// How `openFile` opens a path, beyond the `O_CLOEXEC` it always adds. Without `readWrite` the file is
    /// opened read-only.
    struct OpenOptions: OptionSet, Sendable {
        let rawValue: Int32

        /// `O_RDWR`.
        static let readWrite = OpenOptions(rawValue: O_RDWR)
        /// `O_CREAT`, with the `mode` given to `openFile`.
        static let create = OpenOptions(rawValue: O_CREAT)
        /// `O_NOFOLLOW`: a symbolic link fails with `Errno.symbolicLink` instead of being followed.
        static let noFollow = OpenOptions(rawValue: O_NOFOLLOW)
        /// `O_NONBLOCK`: a FIFO opens at once instead of waiting for a writer.
        static let nonBlocking = OpenOptions(rawValue: O_NONBLOCK)
        /// `O_NOCTTY`: a terminal never becomes the controlling terminal.
        static let noControllingTerminal = OpenOptions(rawValue: O_NOCTTY)

        /// For a file whose kind is not trusted yet (a state file): not followed, not blocking, not a terminal.
        static let untrusted: OpenOptions = [.noFollow, .nonBlocking, .noControllingTerminal]
    }

    /// `open(2)` with `options` and `O_CLOEXEC`; the error's `systemError` carries the errno
    /// (`Errno.noSuchFile`, …). `medium`: where the file lives (`OffLoop`); the descriptor's reads and writes are
    /// checked for the same.
    static func openFile(
        _ path: String, _ options: OpenOptions = [], mode: FileMode = 0, medium: OffLoop.Medium = .storage
    ) throws(AgentError) -> OpenFile {
        OffLoop.check("open", path, medium)
        let flags = options.rawValue | O_CLOEXEC | (options.contains(.readWrite) ? 0 : O_RDONLY)
        let fd = retryingEINTR { open(path, flags, mode) }
        if fd < 0 { throw storageError("open", path) }
        return OpenFile(path: path, descriptor: fd, medium: medium)
    }

    /// An open file descriptor, closed when this value goes (a `close` error on a descriptor only read from or
    /// locked says nothing the caller could act on; writes are made durable with `fsync` before). Its reads and
    /// writes make the off-loop check (`OffLoop`); `fstat` of the descriptor (its inode is in memory once open)
    /// and the non-waiting `flock` cannot stall on the device and do not.
    final class OpenFile: Sendable {
        let path: String
        private let descriptor: Int32
        private let medium: OffLoop.Medium

        fileprivate init(path: String, descriptor: Int32, medium: OffLoop.Medium) {
            self.path = path
            self.descriptor = descriptor
            self.medium = medium
        }

        deinit { close(descriptor) }

        /// `fstat` of the descriptor: what was opened, not what the path names now.
        func status() throws(AgentError) -> FileInfo {
            var info = stat()
            if fstat(descriptor, &info) != 0 { throw storageError("fstat", path) }
            return FileInfo(info)
        }

        /// Reads to the end; nil when there is more than `limit` bytes.
        func readAll(limit: Int) throws(AgentError) -> [UInt8]? {
            OffLoop.check("read", path, medium)
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                // SAFETY: the buffer is `chunk`'s own storage, alive for the closure; read(2) writes at most
                // `buffer.count` bytes into it.
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
            OffLoop.check("read", path, medium)
            var buffer = [UInt8](repeating: 0, count: count)
            // SAFETY: the buffer is `buffer`'s own storage, alive for the closure; pread(2) writes at most
            // `raw.count` bytes into it.
            let read = buffer.withUnsafeMutableBytes { raw in
                retryingEINTR { pread(descriptor, raw.baseAddress, raw.count, 0) }
            }
            if read < 0 { throw storageError("read", path) }
            return Array(buffer[0..<read])
        }

        /// Makes `bytes` the whole content of the file (written at offset 0, then cut to their length). Written
        /// first and cut after, not truncated to nothing first: on ext4 a truncate to zero frees the file's blocks
        /// in a journal transaction, which at the daemon's start (the lock file) waited up to milliseconds behind
        /// the journal; a cut to the same length or within the last block frees nothing.
        func replaceContents(_ bytes: [UInt8]) throws(AgentError) {
            OffLoop.check("write", path, medium)
            var written = 0
            while written < bytes.count {
                // SAFETY: the buffer is `bytes`' own storage, alive for the closure; `written < buffer.count`, so
                // the pointer and length stay inside it.
                let count = bytes.withUnsafeBytes { buffer in
                    retryingEINTR {
                        pwrite(descriptor, buffer.baseAddress! + written, buffer.count - written, off_t(written))
                    }
                }
                if count < 0 { throw storageError("write", path) }
                written += count
            }
            if retryingEINTR({ ftruncate(descriptor, off_t(bytes.count)) }) != 0 {
                throw storageError("ftruncate", path)
            }
        }

        /// Takes an exclusive `flock` without waiting: false when another open file description holds one.
        func tryLock() throws(AgentError) -> Bool {
            if retryingEINTR({ flock(descriptor, LOCK_EX | LOCK_NB) }) == 0 { return true }
            if errno == EWOULDBLOCK { return false }
            throw storageError("flock", path)
        }

        /// Releases a `flock` this descriptor took. Closing alone is not enough: the lock belongs to the open
        /// file description, which a child forked at that moment (before its exec closes `O_CLOEXEC` descriptors)
        /// still references, so the lock would outlive the close by as long as the child takes to exec.
        func unlock() {
            _ = retryingEINTR { flock(descriptor, LOCK_UN) }
        }
    }
}
