import Synchronization

/// The one check every blocking file primitive makes first (a durable write, a directory's fsync, a shred):
/// once the daemon serves (`serving`), such a call on the event loop's thread (`onLoop`) is a bug, since an SD
/// card or a busy eMMC can stall one fsync for seconds and the loop also answers the control socket and the
/// pairing port and pings the watchdog. Such work belongs on the disk lane (`DiskLane`). A debug build, the
/// tests', reports a call to `violation` (a test records it; otherwise the process stops with the operation and
/// path named); a release build checks nothing.
enum OffLoop {
    /// Set by the daemon once its start-up is over (the start's own writes run before the loop serves).
    static let serving = Atomic<Bool>(false)
    /// Whether the calling thread is the event loop's: set by the daemon (nothing is on a loop before).
    static let onLoop = Mutex<@Sendable () -> Bool>({ false })
    /// What a debug build does with a blocking call on the loop: stop, naming it (a test records it instead).
    static let violation = Mutex<@Sendable (String) -> Void>({ message in assertionFailure(message) })

    /// The check: `operation` (`fsync`, `shred`, …) on `path`.
    static func check(_ operation: String, _ path: String) {
        #if DEBUG
            guard serving.load(ordering: .relaxed), onLoop.withLock({ $0 })() else { return }
            violation.withLock { $0 }(
                "\(operation) of \(path) on the event loop: blocking file work belongs on DiskLane")
        #endif
    }
}
