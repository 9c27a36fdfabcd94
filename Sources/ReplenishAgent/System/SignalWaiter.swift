import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// SIGTERM and SIGINT for the long-running commands (`run`, `gpio-watch`), without libdispatch: the program's
/// entry point blocks them before any other thread exists (`block`), so every thread inherits the mask and
/// none is ever interrupted by them, and then the main thread takes them one by one with sigwait(2)
/// (`takeOnMainThread`) and hands each to whoever listens (`listen`). A signal that comes while nobody
/// listens is kept for the first listener, so a SIGTERM during start-up still stops the agent gracefully.
/// The main thread has nothing else to do (the work runs on the event loop, `LoopExecutor`), and it sleeps in
/// sigwait: no wakeups.
enum TerminationSignals {
    /// A signal a command may wait for.
    struct Signal: Sendable, Equatable {
        let number: Int32

        /// SIGINT (Ctrl-C).
        static let interrupt = Signal(number: SIGINT)
        /// SIGTERM (systemd's and `kill`'s stop).
        static let terminate = Signal(number: SIGTERM)
    }

    static let all: [Signal] = [.terminate, .interrupt]

    private struct State {
        var owned = false
        var listeners: [Int: @Sendable (Signal) -> Void] = [:]
        var nextID = 0
        var kept: [Signal] = []
    }

    private static let state = Mutex(State())

    /// Blocks SIGTERM and SIGINT in the calling thread: call it on the main thread before any other thread
    /// exists, so that they are blocked in every thread.
    static func block() {
        var set = signalSet()
        pthread_sigmask(SIG_BLOCK, &set, nil)
        state.withLock { $0.owned = true }
    }

    /// Whether `block` ran: the signals are taken by `takeOnMainThread`, and must stay blocked elsewhere.
    static var areOwned: Bool { state.withLock { $0.owned } }

    /// Takes the signals for ever (on the main thread, after `block`), handing each to the listeners.
    static func takeOnMainThread() -> Never {
        var set = signalSet()
        while true {
            var number: Int32 = 0
            guard sigwait(&set, &number) == 0 else { continue }
            let signal = Signal(number: number)
            let listeners = state.withLock { state -> [@Sendable (Signal) -> Void] in
                if state.listeners.isEmpty { state.kept.append(signal) }
                return Array(state.listeners.values)
            }
            for listener in listeners { listener(signal) }
        }
    }

    /// Calls `handler` (on the main thread) for each signal from now on, and at once for those that came
    /// while nobody listened; returns the id for `stopListening`.
    static func listen(_ handler: @escaping @Sendable (Signal) -> Void) -> Int {
        let (id, kept) = state.withLock { state -> (Int, [Signal]) in
            let id = state.nextID
            state.nextID += 1
            state.listeners[id] = handler
            defer { state.kept = [] }
            return (id, state.kept)
        }
        for signal in kept { handler(signal) }
        return id
    }

    static func stopListening(_ id: Int) {
        _ = state.withLock { $0.listeners.removeValue(forKey: id) }
    }

    /// This thread's mask with every signal unblocked except those `block` handed to the main thread.
    static func unblockAllButOwned() {
        var set = sigset_t()
        sigemptyset(&set)
        if areOwned { set = signalSet() }
        pthread_sigmask(SIG_SETMASK, &set, nil)
    }

    private static func signalSet() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in all { sigaddset(&set, signal.number) }
        return set
    }
}

/// Waits for one of some signals (for short-lived commands such as `gpio-watch`; the daemon's service group
/// listens to `TerminationSignals` itself). Needs `TerminationSignals.block` at the program's start.
final class SignalWaiter: Sendable {
    typealias Signal = TerminationSignals.Signal

    private let waker = Waker()
    private let id: Int

    init(signals: [Signal]) {
        let waker = waker
        id = TerminationSignals.listen { signal in
            if signals.contains(signal) { waker.ring() }
        }
    }

    deinit { TerminationSignals.stopListening(id) }

    /// Returns on a signal or after `duration`, whichever comes first.
    func wait<C: Clock>(orFor duration: Duration, clock: C) async where C.Duration == Duration {
        await waker.wait(timeout: duration, clock: clock)
    }
}
