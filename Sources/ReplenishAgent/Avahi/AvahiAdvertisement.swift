import CAvahi
import NIOPosix
import Synchronization

/// One DNS-SD service published through avahi-daemon (libavahi-client, on Avahi's own thread: `CAvahi`), from
/// `start` until `stop`. A missing avahi-daemon is not an error: the advertisement waits for one and publishes
/// once it appears, and again after it restarts (`AVAHI_CLIENT_NO_FAIL`). A lost system bus ends it (`.ended`):
/// its owner makes another. Every change is reported to `onChange` from Avahi's thread.
///
/// `start` and `stop` block: the first loads libavahi-client (dlopen) and holds a D-Bus handshake with the system
/// bus, the second joins Avahi's thread. Both run on a lane of their own (`lane`), never on the event loop, which
/// meanwhile answers the pairing port, the control socket and the watchdog. Neither is waited for without bound:
/// a hung avahi-daemon holds a call of libavahi-client for libdbus's 25 s, and the agent's stop has 10 s.
final class AvahiAdvertisement: Sendable {
    /// The one thread `start` and `stop` run on, made at the first `start` (a device that is paired never opens
    /// a pairing window, and never makes it). It sleeps on a condition variable when idle.
    private static let lane: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        pool.submit { _ in POSIX.nameThisThread("avahi-lane") }
        return pool
    }()

    /// How long `stop` waits for the withdrawal: milliseconds when Avahi's thread is idle, even with the daemon
    /// hung; only a callback of Avahi's thread that waits for a hung daemon (a publish) holds it longer.
    static let stopBound: Duration = .seconds(2)

    /// What the advertisement is doing.
    enum Change: Sendable {
        /// Established on the network, under the host name the daemon publishes (`name.local`, or another after a
        /// conflict such as `name-2.local`), when it said one.
        case advertised(hostName: String?)
        /// Being registered with the daemon.
        case registering
        /// No avahi-daemon answers on the system bus: waiting for one.
        case waitingForDaemon
        /// The daemon refused the service, with Avahi's reason.
        case failed(String)
        /// The system bus went away, with the reason: this advertisement has no client any more and never makes
        /// one. Its owner stops it and starts another.
        case ended(String)
    }

    /// Receives the changes; kept alive (retained for C) until `stop` returns.
    fileprivate final class Receiver: Sendable {
        let onChange: @Sendable (Change) -> Void
        init(_ onChange: @escaping @Sendable (Change) -> Void) { self.onChange = onChange }
    }

    // SAFETY: the pointer is owned by this value alone: made by `cavahi_start`, freed once by `stopBlocking`
    // (called by `stop`, once, by its one owner, `PairingAdvertiser`, or by `start` for an advertisement its
    // abandoned caller never received), and only handed to cavahi_stop, the one call that uses it.
    private nonisolated(unsafe) let handle: OpaquePointer
    // SAFETY: the receiver retained for Avahi's thread, released by `stopBlocking` once cavahi_stop has returned.
    private let receiver: Unmanaged<Receiver>

    // SAFETY: takes over the retained receiver that `start` handed to cavahi_start; `stopBlocking` releases it.
    private init(handle: OpaquePointer, receiver: Unmanaged<Receiver>) {
        self.handle = handle
        self.receiver = receiver
    }

    /// Starts publishing `name` of `type` on `port` with `txt`; throws Avahi's reason when not even a client could
    /// be made (no system bus, out of memory): the caller tries again later. A cancelled caller (the agent
    /// stopping) stops waiting at once; what the lane still makes then is stopped there.
    static func start(
        name: String, type: String, port: Int, txt: [String], onChange: @escaping @Sendable (Change) -> Void
    ) async throws(AgentError) -> AvahiAdvertisement {
        let result = await onLane(bound: nil) { (abandoned: Bool) -> Result<AvahiAdvertisement, AgentError>? in
            // A start whose caller has gone before it ran makes nothing.
            guard !abandoned else { return nil }
            return Result { () throws(AgentError) in
                try startBlocking(name: name, type: type, port: port, txt: txt, onChange: onChange)
            }
        } leftover: { result in
            if case .success(let advertisement)? = result { advertisement.stopBlocking() }
        }
        guard let made = result ?? nil else {
            throw AgentError(.network, "the DNS-SD advertisement was not started (the agent is stopping)")
        }
        return try made.get()
    }

    private static func startBlocking(
        name: String, type: String, port: Int, txt: [String], onChange: @escaping @Sendable (Change) -> Void
    ) throws(AgentError) -> AvahiAdvertisement {
        OffLoop.check("libavahi-client's start (dlopen, a D-Bus handshake)", name)
        // Held for the start's own failure too, so that its reason is Avahi's text (the advertisement holds it on).
        let held = cavahi_hold() == 0
        defer { if held { cavahi_release() } }
        // SAFETY: the receiver is retained here and released by `stopBlocking` (or below on failure), after
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

    /// Holds libavahi-client loaded (on the lane: dlopen of it and of the D-Bus and systemd libraries it pulls
    /// in) until `releaseLibrary`: a pairing window holds it while open, so that a start tried again every few
    /// seconds (no system bus yet) loads nothing anew. False when it is not installed (nothing held).
    static func holdLibrary() async -> Bool {
        await onLane(bound: nil) { abandoned in
            guard !abandoned else { return false }
            OffLoop.check("libavahi-client's load (dlopen)", "the DNS-SD advertisement")
            return cavahi_hold() == 0
        } leftover: { held in
            if held { cavahi_release() }
        } ?? false
    }

    /// Ends a hold of `holdLibrary`. Runs on the lane after what was submitted there before it (the stop of the
    /// window's advertisement, Avahi's thread joined), not waited for: the last hold unloads the libraries
    /// (dlclose), and a paired device maps none of them again.
    static func releaseLibrary() {
        lane.submit { _ in cavahi_release() }
    }

    /// Withdraws the service: closes the client's connection to the system bus, whose end tells avahi-daemon to
    /// withdraw it (its goodbye at once), and stops Avahi's thread. Runs on the lane even when the caller is
    /// cancelled (a stop of the agent), and waits for it at most `stopBound`: false when that passed (Avahi's
    /// thread waits for a hung daemon; the lane withdraws it once that call returns, or the agent's exit closes
    /// the connection). Call once.
    @discardableResult
    func stop() async -> Bool {
        await Self.onLane(bound: Self.stopBound, abandonsOnCancel: false) { _ in self.stopBlocking() } != nil
    }

    private func stopBlocking() {
        OffLoop.check("libavahi-client's stop (a thread's join)", "the DNS-SD advertisement")
        cavahi_stop(handle)
        receiver.release()
    }

    /// Runs `work` on the lane and returns its value, or nil once the caller stops waiting: `bound` has passed,
    /// or (`abandonsOnCancel`) the calling task is cancelled. `work` always runs, told whether the caller has
    /// already gone; the value of a call the caller no longer waits for goes to `leftover`, on the lane.
    private static func onLane<Value: Sendable>(
        bound: Duration?, abandonsOnCancel: Bool = true, _ work: @escaping @Sendable (_ abandoned: Bool) -> Value,
        leftover: @escaping @Sendable (Value) -> Void = { _ in }
    ) async -> Value? {
        let call = LaneCall<Value>()
        let timer = bound.map { bound in
            Task {
                guard (try? await ContinuousClock().loopSleep(for: bound)) != nil else { return }
                call.abandon()
            }
        }
        defer { timer?.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
                call.wait(continuation)
                lane.submit { _ in
                    let value = work(call.isAbandoned)
                    if !call.finish(value) { leftover(value) }
                }
            }
        } onCancel: {
            if abandonsOnCancel { call.abandon() }
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

/// One call on the lane and its one waiter, who may stop waiting before it returns: whichever comes first, the
/// call's value or the end of the wait, resumes the waiter, once.
private final class LaneCall<Value: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Value?, Never>?
        var over = false
    }
    private let state = Mutex(State())

    var isAbandoned: Bool { state.withLock { $0.over } }

    /// Sets the waiter; resumed at once when the wait is already over (a caller cancelled before it waited).
    func wait(_ continuation: CheckedContinuation<Value?, Never>) {
        let over = state.withLock { state in
            if !state.over { state.continuation = continuation }
            return state.over
        }
        if over { continuation.resume(returning: nil) }
    }

    /// The call's value for the waiter; false when the waiter had gone (the value is the caller's to dispose of).
    func finish(_ value: Value) -> Bool {
        let waiter = state.withLock { state -> CheckedContinuation<Value?, Never>?? in
            guard !state.over else { return .none }
            state.over = true
            defer { state.continuation = nil }
            return .some(state.continuation)
        }
        guard let waiter else { return false }
        waiter?.resume(returning: value)
        return true
    }

    /// Ends the wait without a value.
    func abandon() {
        let waiter = state.withLock { state -> CheckedContinuation<Value?, Never>? in
            guard !state.over else { return nil }
            state.over = true
            defer { state.continuation = nil }
            return state.continuation
        }
        waiter?.resume(returning: nil)
    }
}

/// Avahi's thread reports a state change (`cavahi_callback`): forwarded to the advertisement's receiver.
// SAFETY: `userdata` is the receiver's opaque pointer (below).
private func avahiStateChanged(
    _ state: cavahi_state, _ error: Int32, _ hostName: UnsafePointer<CChar>?, _ userdata: UnsafeMutableRawPointer?
) {
    guard let userdata else { return }
    // SAFETY: `userdata` is the retained receiver passed to cavahi_start, alive until after cavahi_stop.
    let receiver = Unmanaged<AvahiAdvertisement.Receiver>.fromOpaque(userdata).takeUnretainedValue()
    switch state {
    // SAFETY: `hostName` is Avahi's NUL-terminated string, valid during this call; it is copied here.
    case CAVAHI_ADVERTISED: receiver.onChange(.advertised(hostName: hostName.map { String(cString: $0) }))
    case CAVAHI_WAITING_FOR_DAEMON: receiver.onChange(.waitingForDaemon)
    case CAVAHI_REGISTERING: receiver.onChange(.registering)
    case CAVAHI_ENDED: receiver.onChange(.ended(AvahiAdvertisement.describe(error)))
    default: receiver.onChange(.failed(AvahiAdvertisement.describe(error)))
    }
}
