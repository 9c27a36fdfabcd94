#if canImport(Glibc)
    import Glibc
#endif

/// A system call that failed: what was being done, on which path, and `errno`. `POSIX` throws it as the
/// `cause` of an `AgentError` (code `storage`), so a caller decides on the errno (`ENOENT`, `ELOOP`, …) rather
/// than on a message; `AgentError.systemError` reads it back.
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The operation as a word of the log line: `open`, `rename`, `flock`, …
    public var operation: String
    public var path: String?
    public var errno: Int32

    public init(_ operation: String, path: String?, errno: Int32) {
        self.operation = operation
        self.path = path
        self.errno = errno
    }

    public var description: String {
        "\(operation)\(path.map { " \($0)" } ?? ""): \(String(cString: strerror(errno)))"
    }
}

extension AgentError {
    /// A failed system call's `storage` error: the message says what and where, the cause carries the errno.
    static func system(_ operation: String, _ path: String?, errno: Int32) -> AgentError {
        let cause = SystemError(operation, path: path, errno: errno)
        return AgentError(.storage, cause.description, cause: cause)
    }

    /// The failed system call underneath, if that is what this error is.
    var systemError: SystemError? { cause as? SystemError }
}
