import Synchronization

/// The one check every blocking file primitive of `POSIX` makes first (an open, a read, a stat, a rename, an
/// unlink, a chmod, a mkdir, a directory listing, a write, an fsync, a shred): once the daemon serves (`serving`),
/// such a call on the event loop's thread (`onLoop`) is a bug, since an SD card or a busy eMMC can stall one
/// system call for seconds and the loop also answers the control socket and the pairing port and pings the
/// watchdog. A debug build, the tests', reports a call to `violation` (a test records it; otherwise the process
/// stops with the operation and path named); a release build checks nothing.
///
/// A call on a file that lives in memory (`Medium.memory`: a tmpfs such as `/run`, or `/proc`) cannot stall on the
/// device and may run on the loop: its caller says so at the call, never by leaving the check out.
enum OffLoop {
    /// Where the file a primitive touches lives, as far as a stall goes.
    enum Medium: Sendable {
        /// Storage that can stall (the flash, a disk): the call belongs off the event loop.
        case storage
        /// Memory (a tmpfs such as `/run`, or `/proc`): the call cannot stall on the device; not checked.
        case memory
    }

    /// Set by the daemon once its start-up is over (the start's own reads and writes run before the loop serves).
    static let serving = Atomic<Bool>(false)
    /// Whether the calling thread is the event loop's: set by the daemon (nothing is on a loop before).
    static let onLoop = Mutex<@Sendable () -> Bool>({ false })
    /// What a debug build does with a blocking call on the loop: stop, naming it (a test records it instead).
    static let violation = Mutex<@Sendable (String) -> Void>({ message in assertionFailure(message) })

    /// A test's own recorder (`OffLoopTests`): within it, calls of this task count as on the serving loop's
    /// (`servingOnThisTask`) and go to the recorder, whatever the daemon's globals say, so that the test neither
    /// changes them for other tests running meanwhile nor stops the process.
    @TaskLocal static var recorded: (@Sendable (String) -> Void)?
    /// Within `recorded`: whether this task's calls count as on the serving loop's.
    @TaskLocal static var servingOnThisTask = true

    /// The check: `operation` (`open`, `fsync`, `shred`, …) on `path`, which lives on `medium`.
    static func check(_ operation: String, _ path: String, _ medium: Medium = .storage) {
        #if DEBUG
            guard medium == .storage else { return }
            let message = "\(operation) of \(path) on the event loop: blocking file work belongs off the event loop"
            if let recorded {
                if servingOnThisTask { recorded(message) }
                return
            }
            guard serving.load(ordering: .relaxed), onLoop.withLock({ $0 })() else { return }
            violation.withLock { $0 }(message)
        #endif
    }
}
