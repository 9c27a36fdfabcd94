import Dispatch

#if canImport(Glibc)
    import Glibc
#endif

/// Waits for one of some signals (for short-lived commands; the daemon uses swift-service-lifecycle).
final class SignalWaiter: Sendable {
    private let waker = Waker()
    private nonisolated(unsafe) let sources: [any DispatchSourceSignal]

    init(signals: [Int32]) {
        let waker = waker
        sources = signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number)
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
