import CAvahi
import NIOPosix

/// One DNS-SD service published through avahi-daemon (libavahi-client, on Avahi's own thread: `CAvahi`), from
/// `start` until `stop`. A missing avahi-daemon is not an error: the advertisement waits for one and publishes
/// once it appears, and again after it restarts (`AVAHI_CLIENT_NO_FAIL`). Every change is reported to
/// `onChange` from Avahi's thread.
///
/// `start` and `stop` block: the first loads libavahi-client (dlopen) and holds a D-Bus handshake with the system
/// bus, the second joins Avahi's thread. Both run on a lane of their own (`lane`), never on the event loop, which
/// meanwhile answers the pairing port, the control socket and the watchdog.
final class AvahiAdvertisement: Sendable {
    /// The one thread `start` and `stop` run on, made at the first `start` (a device that is paired never opens
    /// a pairing window, and never makes it). It sleeps on a condition variable when idle.
    private static let lane: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        pool.submit { _ in POSIX.nameThisThread("avahi-lane") }
        return pool
    }()

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
    ) async throws(AgentError) -> AvahiAdvertisement {
        // A start cancelled before it ran (a stop meanwhile) makes nothing; one that ran hands its result back.
        let result: Result<AvahiAdvertisement, AgentError>
        do {
            result = try await lane.runIfActive {
                Result { () throws(AgentError) in
                    try startBlocking(name: name, type: type, port: port, txt: txt, onChange: onChange)
                }
            }
        } catch {
            throw AgentError(.network, "the DNS-SD advertisement was not started (the agent is stopping)")
        }
        return try result.get()
    }

    private static func startBlocking(
        name: String, type: String, port: Int, txt: [String], onChange: @escaping @Sendable (Change) -> Void
    ) throws(AgentError) -> AvahiAdvertisement {
        OffLoop.check("libavahi-client's start (dlopen, a D-Bus handshake)", name)
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
    /// thread that only waits in poll(2), woken at once. Runs on the lane even when the caller is cancelled (a
    /// stop of the agent): a published service is always withdrawn. Call once.
    func stop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Self.lane.submit { _ in
                // Whether the pool is active or not: the advertisement is withdrawn and its receiver released.
                OffLoop.check("libavahi-client's stop (a thread's join)", "the DNS-SD advertisement")
                cavahi_stop(self.handle)
                self.receiver.release()
                continuation.resume()
            }
        }
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
