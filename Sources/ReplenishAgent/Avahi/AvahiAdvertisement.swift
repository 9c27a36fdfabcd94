import CAvahi

/// One DNS-SD service published through avahi-daemon (libavahi-client, on Avahi's own thread: `CAvahi`), from
/// `start` until `stop`. A missing avahi-daemon is not an error: the advertisement waits for one and publishes
/// once it appears, and again after it restarts (`AVAHI_CLIENT_NO_FAIL`). Every change is reported to
/// `onChange` from Avahi's thread.
final class AvahiAdvertisement: Sendable {
    /// What the advertisement is doing.
    enum Change: Sendable, Equatable {
        /// Established on the network.
        case advertised
        /// Being registered with the daemon.
        case registering
        /// No avahi-daemon answers on the system bus: waiting for one.
        case waitingForDaemon
        /// The daemon refused the service, with Avahi's reason.
        case failed(String)
    }

    /// Receives the changes; kept alive (retained for C) until `stop` returns.
    fileprivate final class Receiver: Sendable {
        let onChange: @Sendable (Change) -> Void
        init(_ onChange: @escaping @Sendable (Change) -> Void) { self.onChange = onChange }
    }

    // SAFETY: the pointer is owned by this value alone: made by `cavahi_start`, freed once by `stop`, and only
    // handed to cavahi_stop, the one call that uses it (its one owner, `PairingAdvertiser`, calls `stop` once).
    private nonisolated(unsafe) let handle: OpaquePointer
    private let receiver: Unmanaged<Receiver>

    // SAFETY: takes over the retained receiver that `start` handed to cavahi_start; `stop` releases it.
    private init(handle: OpaquePointer, receiver: Unmanaged<Receiver>) {
        self.handle = handle
        self.receiver = receiver
    }

    /// Starts publishing `name` of `type` on `port` with `txt`; throws Avahi's reason when not even a client could
    /// be made (no system D-Bus, out of memory): the caller tries again later.
    static func start(
        name: String, type: String, port: Int, txt: [String], onChange: @escaping @Sendable (Change) -> Void
    ) throws(AgentError) -> AvahiAdvertisement {
        // SAFETY: the receiver is retained here and released by `stop` (or below on failure), after
        // cavahi_stop has returned, so Avahi's thread never calls back into a freed receiver.
        let receiver = Unmanaged.passRetained(Receiver(onChange))
        var error: Int32 = 0
        // TXT strings hold no line break (`PairingAdvertisement` makes them): one a line.
        let handle = cavahi_start(
            name, type, UInt16(clamping: port), txt.joined(separator: "\n"), avahiStateChanged, receiver.toOpaque(),
            &error)
        guard let handle else {
            receiver.release()
            throw AgentError(.network, "libavahi-client: \(describe(error))")
        }
        return AvahiAdvertisement(handle: handle, receiver: receiver)
    }

    /// Withdraws the service (avahi-daemon sends its goodbye at once) and stops Avahi's thread: a join of a
    /// thread that only waits in poll(2), woken at once. Call once.
    func stop() {
        cavahi_stop(handle)
        receiver.release()
    }

    /// Nil when an avahi-daemon answers on the system bus now; otherwise why not (`check-config`).
    static func probe() -> String? {
        let error = cavahi_probe()
        return error == 0 ? nil : describe(error)
    }

    fileprivate static func describe(_ error: Int32) -> String {
        cavahi_strerror(error).map { String(cString: $0) } ?? "error \(error)"
    }
}

/// Avahi's thread reports a state change (`cavahi_callback`): forwarded to the advertisement's receiver.
// SAFETY: `userdata` is the receiver's opaque pointer (below).
private func avahiStateChanged(_ state: cavahi_state, _ error: Int32, _ userdata: UnsafeMutableRawPointer?) {
    guard let userdata else { return }
    // SAFETY: `userdata` is the retained receiver passed to cavahi_start, alive until after cavahi_stop.
    let receiver = Unmanaged<AvahiAdvertisement.Receiver>.fromOpaque(userdata).takeUnretainedValue()
    switch state {
    case CAVAHI_ADVERTISED: receiver.onChange(.advertised)
    case CAVAHI_WAITING_FOR_DAEMON: receiver.onChange(.waitingForDaemon)
    case CAVAHI_REGISTERING: receiver.onChange(.registering)
    default: receiver.onChange(.failed(AvahiAdvertisement.describe(error)))
    }
}
