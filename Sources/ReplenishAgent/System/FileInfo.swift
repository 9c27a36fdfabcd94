#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A user id (`uid_t`), as the rest of the agent names it without importing the C library.
typealias UserID = uid_t

/// Permission bits of a file (`mode_t`, the low 12 bits: `0o600`, `0o700`, …).
typealias FileMode = mode_t

/// What `stat(2)` says about a file, in the words the agent decides on: what kind of file it is, who owns it,
/// its permission bits and its size. `POSIX.status`, `POSIX.linkStatus` and `POSIX.OpenFile.status` return it.
struct FileInfo: Sendable, Equatable {
    var kind: FileKind
    var owner: UserID
    /// The permission bits only (`st_mode & 0o7777`): `0o600` for a private file.
    var permissions: FileMode
    var size: Int

    init(kind: FileKind, owner: UserID, permissions: FileMode, size: Int) {
        self.kind = kind
        self.owner = owner
        self.permissions = permissions
        self.size = size
    }

    init(_ info: stat) {
        kind = FileKind(mode: info.st_mode)
        owner = info.st_uid
        permissions = info.st_mode & 0o7777
        size = Int(info.st_size)
    }

    /// Group or others have some access (read, write or search).
    var isReachableByOthers: Bool { permissions & 0o077 != 0 }

    /// The permission bits as `chmod` writes them (`644`), for messages.
    var octalPermissions: String { String(permissions & 0o777, radix: 8) }
}

/// The kind of a file (`st_mode & S_IFMT`).
enum FileKind: Sendable, Equatable, CustomStringConvertible {
    case regular, directory, symbolicLink, fifo, socket, characterDevice, blockDevice
    /// A type bit pattern this build does not name.
    case other(FileMode)

    init(mode: FileMode) {
        switch mode & S_IFMT {
        case S_IFREG: self = .regular
        case S_IFDIR: self = .directory
        case S_IFLNK: self = .symbolicLink
        case S_IFIFO: self = .fifo
        case S_IFSOCK: self = .socket
        case S_IFCHR: self = .characterDevice
        case S_IFBLK: self = .blockDevice
        default: self = .other(mode & S_IFMT)
        }
    }

    /// In words for a log line: "regular file", "symbolic link", …
    var description: String {
        switch self {
        case .regular: "regular file"
        case .directory: "directory"
        case .symbolicLink: "symbolic link"
        case .fifo: "FIFO"
        case .socket: "socket"
        case .characterDevice: "character device"
        case .blockDevice: "block device"
        case .other(let bits): "file of type \(String(bits, radix: 8))"
        }
    }
}
