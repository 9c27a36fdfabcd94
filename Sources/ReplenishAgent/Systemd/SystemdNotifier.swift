/// systemd's notify protocol (sd_notify(3)), spoken directly: each message is one datagram of `KEY=VALUE`
/// lines sent to the AF_UNIX socket named by `$NOTIFY_SOCKET` (a path, or an abstract name written with a
/// leading `@`). No libsystemd. Without `$NOTIFY_SOCKET` (not started by systemd, or a unit that is not
/// `Type=notify`) every call does nothing.
struct SystemdNotifier: Sendable {
    /// A socket file (`.path`) or an abstract socket name (`.abstract`, `@name` in the variable).
    typealias Address = UnixDatagram.Address

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
            if let value = POSIX.environment(name) { environment[name] = value }
        }
        return SystemdNotifier(environment: environment, pid: POSIX.processID())
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

    /// Sends one datagram; nothing without `$NOTIFY_SOCKET`. Never raises SIGPIPE. Returns nil once sent, else
    /// the reason (a notification is never worth stopping the agent for).
    @discardableResult func send(_ message: String) -> String? {
        guard let address else { return nil }
        do throws(SystemError) {
            try UnixDatagram.send(Array(message.utf8), to: address)
            return nil
        } catch {
            if error.errno == Errno.nameTooLong { return "NOTIFY_SOCKET is longer than a socket address can hold" }
            return "notify systemd: \(error)"
        }
    }
}
