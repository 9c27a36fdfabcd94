import NIOCore
import NIOPosix
import Synchronization

/// The agent's one thread for the flash: every write of a state file (tokens, the outbox, the status record, the
/// deregistration queue, the runtime directory's shown state, a reset's wipe) runs here, never on the event
/// loop. An SD card or a busy eMMC can stall one `fsync` for seconds; meanwhile the loop still answers the
/// control socket and the pairing endpoints and pings the watchdog, and the caller, an actor, is suspended only
/// in the task that asked for the write.
///
/// Writes run one at a time in the order they were submitted: a caller submits synchronously, on its own actor
/// (`isolation`), so two writes an actor asks for in turn reach the file in that order. The lane is the thread
/// of a one-thread `NIOThreadPool`, as curl's lanes are (`CurlHTTPClient`): it sleeps on a condition variable
/// when idle and never wakes on its own.
final class DiskLane: Sendable {
    /// The daemon's lane, made at the first write.
    static let shared = DiskLane()
    /// The outbox's own lane: a press's write never queues behind a write of another file (the status record of
    /// the duties, a token refresh), only behind earlier writes of the outbox, whose order it keeps.
    static let outbox = DiskLane()

    private let pool: NIOThreadPool

    init() {
        pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
    }

    deinit { pool.shutdownGracefully { _ in } }

    /// Runs `work` on the lane after every write submitted before it and returns its result. The write is
    /// carried out even when the caller's task is cancelled meanwhile (a stop): a write that was asked for is
    /// never cut short half-way, and whoever asked hears how it went.
    func run<T: Sendable>(
        isolation: isolated (any Actor)? = #isolation, _ work: @escaping @Sendable () throws(AgentError) -> T
    ) async throws(AgentError) -> T {
        let result: Result<T, AgentError> = await withCheckedContinuation(isolation: isolation) { continuation in
            pool.submit { state in
                guard case .active = state else {
                    continuation.resume(returning: .failure(AgentError(.storage, "the disk lane has stopped")))
                    return
                }
                do throws(AgentError) {
                    continuation.resume(returning: .success(try work()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    /// Writes `value` to `path` in its format's current version, atomically and durably (`StateFile.save`).
    func save<T: StateFormat>(isolation: isolated (any Actor)? = #isolation, _ value: T, to path: String)
        async throws(AgentError)
    {
        // Encoded on the caller's thread (a few hundred bytes of JSON): only the file's system calls go to the lane.
        let bytes = try StateFile.encode(value, for: path)
        try await run(isolation: isolation) { () throws(AgentError) in try POSIX.writeFileAtomically(path, bytes) }
    }

    /// Writes `value` to `path` now, on the calling thread, atomically and durably: for the commands that run
    /// without the daemon (`reset`, `deregister`, `cancel-test-orders` with no daemon running), for the daemon's
    /// start before the event loop serves, and for work already on a lane (a reset's wipe). Everything else
    /// writes through a lane (`save`).
    static func saveNow<T: StateFormat>(_ value: T, to path: String) throws(AgentError) {
        try POSIX.writeFileAtomically(path, try StateFile.encode(value, for: path))
    }

    /// `bytes` to `path` now, on the calling thread, without fsync: a file of the runtime directory (a tmpfs),
    /// the boot mark at the daemon's start (`BootIdentity`) and the shown status on the lane (`ShownStatusBook`).
    static func writeNow(_ bytes: [UInt8], to path: String) throws(AgentError) {
        try POSIX.writeFileAtomically(path, bytes, durable: false)
    }

    /// Overwrites `path` with zeros, syncs and unlinks it (`POSIX.shred`).
    func shred(isolation: isolated (any Actor)? = #isolation, _ path: String) async throws(AgentError) {
        try await run(isolation: isolation) { () throws(AgentError) in try POSIX.shred(path) }
    }

    /// Set once the daemon's start-up is over (`Agent`, with READY): from then on no durable write may run on
    /// the event loop. Debug builds, the tests' builds, stop at one (`POSIX.writeFileAtomically`, `POSIX.shred`),
    /// so a write that bypasses the lane fails the process tests instead of freezing a device.
    static let serving = Atomic<Bool>(false)

    /// True where a durable write must not run now: the event loop's thread of a daemon that serves.
    static var writeForbiddenHere: Bool {
        serving.load(ordering: .relaxed) && MultiThreadedEventLoopGroup.currentEventLoop != nil
    }
}
