#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A system call that failed: what was being done, on which path, and `errno`. `POSIX` throws it as the
/// `cause` of an `AgentError` (code `storage`), so a caller decides on the errno (`Errno.noSuchFile`, …) rather
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
        "\(operation)\(path.map { " \($0)" } ?? ""): \(POSIX.describe(errno))"
    }
}

/// The errno values the agent decides on outside `System/`, by name, so that no other file needs the C library
/// to compare `SystemError.errno`.
enum Errno {
    /// ENOENT: the path does not exist.
    static let noSuchFile = ENOENT
    /// EEXIST: the path exists (a create that must not replace).
    static let exists = EEXIST
    /// ELOOP: `O_NOFOLLOW` met a symbolic link.
    static let symbolicLink = ELOOP
    /// EISDIR: a directory where a file was wanted.
    static let isDirectory = EISDIR
    /// ENXIO: a socket (or a FIFO without a reader) opened as a file.
    static let noDeviceOrAddress = ENXIO
    /// ENODEV: a device node without a device.
    static let noDevice = ENODEV
    /// EACCES: the permission bits refuse it.
    static let permissionDenied = EACCES
    /// EPERM: the operation is not permitted to this user at all.
    static let notPermitted = EPERM
    /// ENAMETOOLONG: a path or socket name longer than the system takes.
    static let nameTooLong = ENAMETOOLONG
}

extension AgentError {
    /// A failed system call's `storage` error: the message says what and where, the cause carries the errno.
    static func system(_ operation: String, _ path: String?, errno: Int32) -> AgentError {
        system(.storage, operation, path, errno: errno)
    }

    /// A failed system call's error of `code` (`hardware` for a GPIO line): the message says what and where, the
    /// cause carries the errno.
    static func system(_ code: Code, _ operation: String, _ path: String?, errno: Int32) -> AgentError {
        let cause = SystemError(operation, path: path, errno: errno)
        return AgentError(code, cause.description, cause: cause)
    }

    /// The failed system call underneath, if that is what this error is.
    var systemError: SystemError? { cause as? SystemError }
}
