#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension POSIX {
    /// Writes a private file (`make-setup-key`) that must not be readable by anyone but its writer on its way:
    /// a temp file with an unpredictable name (`PATH.new-<16 random hex digits>`), created with `O_EXCL` and
    /// `O_NOFOLLOW` (a file or link another user made first is never opened), mode 0600, written and fsynced, then
    /// put in place: with `link`, which fails when `path` exists (`replace: false`, never a key over a key, and no
    /// window between a look and the write), or with `rename` (`replace: true`, keeping the replaced file's owner
    /// and group). The directory is fsynced last.
    /// Throws a storage error whose errno is `EEXIST` when `path` exists and `replace` is false.
    static func writeNewPrivateFile(_ path: String, _ bytes: [UInt8], replace: Bool) throws(AgentError) {
        var generator = SystemRandomNumberGenerator()
        let suffix = (0..<8).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let temp = "\(path).new-\(hexDigits(suffix))"
        let fd = retryingEINTR { open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600) }
        if fd < 0 { throw storageError("create", temp) }
        // The temp file is ours alone from here (O_EXCL): removed on every failure below.
        defer { unlink(temp) }
        guard writeAll(bytes, to: fd), fchmod(fd, 0o600) == 0, retryingEINTR({ fsync(fd) }) == 0 else {
            let error = errno
            close(fd)
            throw storageError("write", temp, error)
        }
        // A replaced key keeps its owner (the agent's user), whoever runs the command (root, at the factory).
        var old = stat()
        if replace, stat(path, &old) == 0, fchown(fd, old.st_uid, old.st_gid) != 0 {
            let error = errno
            close(fd)
            throw storageError("chown", temp, error)
        }
        close(fd)
        if replace {
            if rename(temp, path) != 0 { throw storageError("rename", path) }
        } else if link(temp, path) != 0 {
            throw storageError("create", path)
        }
        try syncDirectory(parentDirectory(of: path))
    }

    private static func hexDigits(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0f)]] }, as: UTF8.self)
    }
}
