#if canImport(Glibc)
    import Glibc
#endif

/// The state directory holds the tokens, the outbox and the control socket: mode 0700, owned by the agent's
/// user, every file in it 0600. `run` creates it when missing and refuses a directory others can read.
enum StateDirectory {
    /// Creates the directory (0700) when missing; then checks it.
    static func prepare(_ path: String) throws(AgentError) {
        if try POSIX.status(path) == nil {
            let parent = POSIX.parentDirectory(of: path)
            if parent != path, try POSIX.status(parent) == nil {
                // Parents are ordinary directories (0755); only the state directory itself is private.
                try createParents(parent)
            }
            if mkdir(path, 0o700) != 0 && errno != EEXIST { throw POSIX.storageError("mkdir", path) }
            // mkdir's mode is filtered by the umask; set exactly 0700.
            if chmod(path, 0o700) != 0 { throw POSIX.storageError("chmod", path) }
        }
        let problems = try problems(path)
        if let first = problems.first { throw AgentError(.storage, first) }
    }

    private static func createParents(_ path: String) throws(AgentError) {
        let parent = POSIX.parentDirectory(of: path)
        if parent != path, try POSIX.status(parent) == nil { try createParents(parent) }
        if mkdir(path, 0o755) != 0 && errno != EEXIST { throw POSIX.storageError("mkdir", path) }
    }

    /// Every permission problem of the directory and its files, one line each; empty when all is well or
    /// when the directory does not exist yet (`run` will create it).
    static func problems(_ path: String) throws(AgentError) -> [String] {
        guard let info = try POSIX.status(path) else { return [] }
        var problems: [String] = []
        guard (info.st_mode & S_IFMT) == S_IFDIR else { return ["stateDirectory: \(path) is not a directory"] }
        if info.st_mode & 0o077 != 0 {
            problems.append(
                "stateDirectory: \(path) has mode \(octal(info.st_mode & 0o777)); group and others must have no access (chmod 700)"
            )
        }
        if info.st_uid != geteuid() {
            problems.append("stateDirectory: \(path) is owned by uid \(info.st_uid), not the agent's uid \(geteuid())")
        }
        guard let directory = opendir(path) else { return problems }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name == "." || name == ".." { continue }
            let file = POSIX.join(path, name)
            guard let fileInfo = try? POSIX.status(file) else { continue }
            // A socket (the simulated board's control socket) is removed and bound anew at every start, so a
            // stale one's mode says nothing; files hold the secrets.
            if (fileInfo.st_mode & S_IFMT) == S_IFSOCK { continue }
            if fileInfo.st_mode & 0o077 != 0 {
                problems.append("stateDirectory: \(file) has mode \(octal(fileInfo.st_mode & 0o777)); it must be 600")
            }
        }
        return problems
    }

    private static func octal(_ mode: mode_t) -> String { String(mode, radix: 8) }
}
