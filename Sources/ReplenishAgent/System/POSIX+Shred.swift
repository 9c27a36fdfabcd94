#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Removing what a reset wipes, so its secrets do not stay in freed blocks where the file system writes in place
/// (ext4; a flash translation layer may still keep old copies). Everything is done relative to directory
/// descriptors (`openat`, `fstatat` without following, `unlinkat`): no path handed to the kernel is longer than
/// one name, so a moved-aside directory nested past `PATH_MAX` goes like a flat one, and no symbolic link is
/// ever followed.
extension POSIX {
    /// Overwrites a regular file with zeros (fsync-ed) and removes it durably. A missing file is not an error;
    /// a link is removed, never followed; a file with another hard link is only unlinked (see `shredFile`).
    static func shred(_ path: String) throws(AgentError) {
        OffLoop.check("shred", path)
        let directory = try openParent(of: path)
        defer { close(directory) }
        try shredFile(in: directory, baseName(of: path), path: path)
        if retryingEINTR({ fsync(directory) }) != 0 { throw storageError("fsync", parentDirectory(of: path)) }
    }

    /// `shred` for whatever the path is: a directory (a state file that once was one, moved aside) has each
    /// entry shredded the same way, however deep, and is then removed; a symbolic link or a special file is
    /// unlinked.
    static func shredEntry(_ path: String) throws(AgentError) {
        OffLoop.check("shred", path)
        let directory = try openParent(of: path)
        defer { close(directory) }
        let name = baseName(of: path)
        var info = stat()
        if fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) != 0 {
            if errno == ENOENT { return }
            throw storageError("lstat", path)
        }
        if info.st_mode & S_IFMT == S_IFDIR {
            try removeTree(in: directory, name, path: path)
        } else {
            try shredFile(in: directory, name, path: path)
        }
        if retryingEINTR({ fsync(directory) }) != 0 { throw storageError("fsync", parentDirectory(of: path)) }
    }

    /// Zeros and unlinks the entry `name` of `directory` (not synced: the caller syncs the directory). Only a
    /// regular file with this one name is overwritten: a file with another hard link (which may be outside the
    /// state directory, a file the agent must not change) keeps its content and loses only this name. Anything
    /// else (a symbolic link, a FIFO, a device) is unlinked without being opened. `path` is for messages.
    private static func shredFile(in directory: Int32, _ name: String, path: String) throws(AgentError) {
        var info = stat()
        if fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) != 0 {
            if errno == ENOENT { return }
            throw storageError("lstat", path)
        }
        if info.st_mode & S_IFMT == S_IFREG && info.st_nlink == 1 && info.st_size > 0 {
            try overwriteWithZeros(in: directory, name, path: path)
        }
        if unlinkat(directory, name, 0) != 0 && errno != ENOENT { throw storageError("unlink", path) }
    }

    /// Overwrites the file with zeros and fsyncs it; checked again on what was opened (`O_NOFOLLOW`, then
    /// `fstat`), so a name swapped since the look is left alone. A file the agent cannot open for writing
    /// (mode 0400) is only unlinked.
    private static func overwriteWithZeros(in directory: Int32, _ name: String, path: String) throws(AgentError) {
        let fd = retryingEINTR { openat(directory, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC) }
        guard fd >= 0 else { return }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_nlink == 1 else { return }
        let zeros = [UInt8](repeating: 0, count: 16 * 1024)
        var left = Int(info.st_size)
        while left > 0 {
            // SAFETY: the buffer is `zeros`' own storage, alive for the closure; at most `buffer.count` bytes of it
            // are read.
            let count = zeros.withUnsafeBytes { buffer in
                retryingEINTR { write(fd, buffer.baseAddress, min(left, buffer.count)) }
            }
            if count <= 0 { throw storageError("overwrite", path) }
            left -= count
        }
        if retryingEINTR({ fsync(fd) }) != 0 { throw storageError("fsync", path) }
    }

    /// Removes the directory `name` of `parent` and everything under it, each file as `shredFile` does. At most
    /// two descriptors are open at a time, whatever the depth: the walk goes down by `openat(O_NOFOLLOW)` and up
    /// by `..`, which must be the very directory it came from (device and inode), or the walk stops with an
    /// error rather than remove anything elsewhere (the tree was moved meanwhile).
    private static func removeTree(in parent: Int32, _ name: String, path: String) throws(AgentError) {
        // The directories from the top down to the current one: each one's name in the one above, and identity.
        var levels: [(name: String, device: dev_t, inode: ino_t)] = []
        var current = try openDirectory(in: parent, name, path: path)
        defer { close(current) }
        var info = stat()
        if fstat(current, &info) != 0 { throw storageError("fstat", path) }
        levels.append((name, info.st_dev, info.st_ino))
        while let level = levels.last {
            let here = levels.count == 1 ? path : "\(path)/…/\(level.name)"
            // The files of this directory go now; the first subdirectory is entered (the rest are met when the
            // walk comes back up and lists what is left).
            var subdirectory: String?
            for entry in try directoryEntries(of: current, path: here) {
                if fstatat(current, entry, &info, AT_SYMLINK_NOFOLLOW) != 0 {
                    if errno == ENOENT { continue }
                    throw storageError("lstat", "\(here)/\(entry)")
                }
                if info.st_mode & S_IFMT == S_IFDIR {
                    if subdirectory == nil { subdirectory = entry }
                } else {
                    try shredFile(in: current, entry, path: "\(here)/\(entry)")
                }
            }
            if let subdirectory {
                let child = try openDirectory(in: current, subdirectory, path: "\(here)/\(subdirectory)")
                close(current)
                current = child
                if fstat(current, &info) != 0 { throw storageError("fstat", "\(here)/\(subdirectory)") }
                levels.append((subdirectory, info.st_dev, info.st_ino))
                continue
            }
            // Empty now: up one level, and remove it there.
            levels.removeLast()
            guard let above = levels.last else { break }
            let up = retryingEINTR { openat(current, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            if up < 0 { throw storageError("open", "\(here)/..") }
            close(current)
            current = up
            if fstat(current, &info) != 0 { throw storageError("fstat", "\(here)/..") }
            guard info.st_dev == above.device && info.st_ino == above.inode else {
                throw AgentError(.storage, "\(path) was moved while it was being removed")
            }
            if unlinkat(current, level.name, AT_REMOVEDIR) != 0 && errno != ENOENT {
                throw storageError("rmdir", here)
            }
        }
        if unlinkat(parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT { throw storageError("rmdir", path) }
    }

    /// The directory holding `path`, opened for `*at` calls.
    private static func openParent(of path: String) throws(AgentError) -> Int32 {
        let directory = parentDirectory(of: path)
        let fd = retryingEINTR { open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        if fd < 0 { throw storageError("open", directory) }
        return fd
    }

    /// The subdirectory `name` of `parent`, opened without following a symbolic link.
    private static func openDirectory(in parent: Int32, _ name: String, path: String) throws(AgentError) -> Int32 {
        let fd = retryingEINTR { openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        if fd < 0 { throw storageError("open", path) }
        return fd
    }

    /// The names in an open directory (`directoryEntries` on a descriptor, which stays open and unmoved).
    private static func directoryEntries(of directory: Int32, path: String) throws(AgentError) -> [String] {
        // fdopendir takes the descriptor it is given: a second one, so `directory` stays the caller's.
        let fd = retryingEINTR { openat(directory, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        if fd < 0 { throw storageError("open", path) }
        guard let stream = fdopendir(fd) else {
            let error = errno
            close(fd)
            throw storageError("opendir", path, error)
        }
        defer { closedir(stream) }
        return names(in: stream)
    }

    /// The last component of `path` (`parentDirectory`'s other half).
    static func baseName(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }
}
