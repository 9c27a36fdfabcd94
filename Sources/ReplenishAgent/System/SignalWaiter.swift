import Dispatch

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Waits for one of some signals (for short-lived commands; the daemon uses swift-service-lifecycle).
final class SignalWaiter: Sendable {
    /// A signal a command may wait for.
    struct Signal: Sendable, Equatable {
        let number: Int32

        /// SIGINT (Ctrl-C).
        static let interrupt = Signal(number: SIGINT)
        /// SIGTERM (systemd's and `kill`'s stop).
        static let terminate = Signal(number: SIGTERM)
    }

    private let waker = Waker()
    // SAFETY: `nonisolated(unsafe)` is sound here: set once in init and read only in deinit (to cancel the sources), when no
    // other reference to this waiter is left; dispatch sources themselves are thread-safe.
    private nonisolated(unsafe) let sources: [any DispatchSourceSignal]

    init(signals: [Signal]) {
        let waker = waker
        sources = signals.map { wanted in
            // Ignored by the default action so that only the dispatch source sees it (the default ends the process).
            signal(wanted.number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: wanted.number)
            source.setEventHandler { waker.ring() }
            source.resume()
            return source
        }
    }

    deinit { for source in sources { source.cancel() } }

    /// Returns on a signal or after `duration`, whichever comes first.
    func wait<C: Clock>(orFor duration: Duration, clock: C) async where C.Duration == Duration {
        await waker.wait(timeout: duration, clock: clock)
    }
}
