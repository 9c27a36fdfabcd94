#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One datagram to an AF_UNIX socket, from a socket of its own that is closed at once (systemd's notify
/// protocol: `SystemdNotifier`).
enum UnixDatagram {
    /// Where a datagram goes.
    enum Address: Sendable, Equatable {
        /// A socket file, e.g. `/run/systemd/notify`.
        case path(String)
        /// An abstract socket name (written `@name`), without the leading NUL.
        case abstract(String)
    }

    /// Sends `bytes` as one datagram. Never raises SIGPIPE (`MSG_NOSIGNAL`). Throws the failed call with its
    /// errno: `socket`, `sendto` (a short send is `EMSGSIZE`), or `Errno.nameTooLong` when the address does not
    /// fit a `sockaddr_un`.
    static func send(_ bytes: [UInt8], to address: Address) throws(SystemError) {
        var name: [UInt8]
        let shown: String
        switch address {
        case .path(let path):
            name = Array(path.utf8)
            shown = path
        case .abstract(let abstract):
            name = [0] + Array(abstract.utf8)
            shown = "@" + abstract
        }
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: socketAddress.sun_path)
        // A path keeps room for its terminating NUL; an abstract name uses every byte it is given.
        guard name.count < capacity || (name.first == 0 && name.count <= capacity) else {
            throw SystemError("sendto", path: shown, errno: ENAMETOOLONG)
        }
        // SAFETY: the raw buffer is `sun_path`'s own storage; `name.count <= capacity` was checked just above.
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { $0.copyBytes(from: name) }
        if name.first != 0 { name.append(0) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + name.count)

        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw SystemError("socket", path: shown, errno: errno) }
        defer { close(descriptor) }
        // SAFETY: a sockaddr_un may be passed as a sockaddr with its length (what sendto(2) expects); the pointer
        // is used only for the duration of the call, while `socketAddress` lives.
        let sent = withUnsafePointer(to: &socketAddress) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                POSIX.retryingEINTR { sendto(descriptor, bytes, bytes.count, Int32(MSG_NOSIGNAL), generic, length) }
            }
        }
        if sent < 0 { throw SystemError("sendto", path: shown, errno: errno) }
        if sent != bytes.count { throw SystemError("sendto", path: shown, errno: EMSGSIZE) }
    }
}
