/// systemd's notify protocol (sd_notify(3)), spoken directly: each message is one datagram of `KEY=VALUE`
/// lines sent to the AF_UNIX socket named by `$NOTIFY_SOCKET` (a path, or an abstract name written with a
/// leading `@`). No libsystemd. Without `$NOTIFY_SOCKET` (not started by systemd, or a unit that is not
/// `Type=notify`) every call does nothing.
struct SystemdNotifier: Sendable {
    enum Address: Sendable, Equatable {
        /// A socket file, e.g. `/run/systemd/notify`.
        case path(String)
        /// An abstract socket name (`@name` in the variable), without the leading NUL.
        case abstract(String)
    }

    /// Where the messages go, or nil when systemd is not listening.
    let address: Address?
    /// `$WATCHDOG_USEC` when it is meant for this process (`$WATCHDOG_PID` unset or ours), else nil.
    let watchdogTimeout: Duration?

    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` from `environment`; `pid` is this process's.
    init(environment: [String: String], pid: Int32) {
        address = Self.address(environment["NOTIFY_SOCKET"])
        watchdogTimeout = Self.watchdogTimeout(
            usec: environment["WATCHDOG_USEC"], watchdogPID: environment["WATCHDOG_PID"], pid: pid)
    }

    /// The notifier for this process, from its environment.
    static func fromProcess() -> SystemdNotifier {
        var environment: [String: String] = [:]
        for name in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] {
            if let value = getenv(name) { environment[name] = String(cString: value) }
        }
        return SystemdNotifier(environment: environment, pid: getpid())
    }

    var isEnabled: Bool { address != nil }

    /// How often to send `WATCHDOG=1`: half the timeout, as sd_watchdog_enabled(3) advises. Nil without a
    /// watchdog or without a socket to send to.
    var watchdogInterval: Duration? {
        guard address != nil, let watchdogTimeout else { return nil }
        return watchdogTimeout / 2
    }

    static func address(_ value: String?) -> Address? {
        guard let value, value.count > 1 else { return nil }
        if value.hasPrefix("/") { return .path(value) }
        if value.hasPrefix("@") { return .abstract(String(value.dropFirst())) }
        return nil  // vsock: and other forms are not spoken here
    }

    static func watchdogTimeout(usec: String?, watchdogPID: String?, pid: Int32) -> Duration? {
        guard let usec, let microseconds = UInt64(usec), microseconds > 0, microseconds < UInt64(Int64.max) else {
            return nil
        }
        if let watchdogPID {
            guard let target = Int32(watchdogPID), target == pid else { return nil }
        }
        return .microseconds(Int64(microseconds))
    }

    /// The datagram for `fields`, in order; a value's line breaks become spaces (one field per line).
    static func message(_ fields: KeyValuePairs<String, String>) -> String {
        fields.map { key, value in
            "\(key)=\(String(value.map { $0.isNewline ? " " : $0 }))"
        }.joined(separator: "\n") + "\n"
    }

    /// Each returns nil once sent (or when there is no systemd), else why it could not be sent.
    @discardableResult func ready(status: String) -> String? { send(Self.message(["READY": "1", "STATUS": status])) }
    @discardableResult func status(_ text: String) -> String? { send(Self.message(["STATUS": text])) }
    @discardableResult func stopping(status: String) -> String? {
        send(Self.message(["STOPPING": "1", "STATUS": status]))
    }
    @discardableResult func watchdog() -> String? { send(Self.message(["WATCHDOG": "1"])) }

    /// Sends one datagram; nothing without `$NOTIFY_SOCKET`. Never raises SIGPIPE (MSG_NOSIGNAL). Returns
    /// nil once sent, else the reason (a notification is never worth stopping the agent for).
    @discardableResult func send(_ message: String) -> String? {
        guard let address else { return nil }
        var name: [UInt8]
        switch address {
        case .path(let path): name = Array(path.utf8)
        case .abstract(let abstract): name = [0] + Array(abstract.utf8)
        }
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: socketAddress.sun_path)
        // A path keeps room for its terminating NUL; an abstract name uses every byte it is given.
        guard name.count < capacity || (name.first == 0 && name.count <= capacity) else {
            return "NOTIFY_SOCKET is longer than a socket address can hold"
        }
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { $0.copyBytes(from: name) }
        if name.first != 0 { name.append(0) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + name.count)

        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return "notify socket: \(POSIX.describe(errno))" }
        defer { close(descriptor) }
        var bytes = Array(message.utf8)
        let sent = withUnsafePointer(to: &socketAddress) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                POSIX.retryingEINTR { sendto(descriptor, &bytes, bytes.count, Int32(MSG_NOSIGNAL), generic, length) }
            }
        }
        guard sent == bytes.count else { return "notify systemd: \(sent < 0 ? POSIX.describe(errno) : "short send")" }
        return nil
    }
}

#if canImport(Glibc)
    import Glibc
#endif
