import NIOCore
import NIOPosix
import Synchronization

/// The agent's threads for the flash: every write of a state file (tokens, the outbox, the status record, the
/// deregistration queue, the runtime directory's shown state, a reset's wipe) runs on one, through the file's
/// store (`StateStore`), never on the event loop. An SD card or a busy eMMC can stall one `fsync` for seconds;
/// meanwhile the loop still answers the control socket and the pairing endpoints and pings the watchdog, and the
/// caller, an actor, is suspended only in the task that asked for the write.
///
/// Writes run one at a time in the order they were submitted: a caller submits synchronously, on its own actor
/// (`isolation`), so two writes an actor asks for in turn reach the file in that order. The lane is the thread
/// of a one-thread `NIOThreadPool`, as curl's lanes are (`CurlHTTPClient`): it sleeps on a condition variable
/// when idle and never wakes on its own.
final class DiskLane: Sendable {
    /// The daemon's lane, made at the first write: every state file's but the outbox's (`StateStore.lane`, and the
    /// daemon's few other file calls through `StateStore.daemonLane`).
    static let shared = DiskLane(name: "disk-lane", stopBound: .daemon)
    /// The outbox's own lane: a press's write never queues behind a write of another file (the status record of
    /// the duties, a token refresh), only behind earlier writes of the outbox, whose order it keeps.
    static let outbox = DiskLane(name: "outbox-lane", stopBound: .daemon)

    /// What a state file's synchronous work needs (`StateStore`'s `read`, `load`, `saveNow`, `shredNow`,
    /// `moveAside`): the proof that its holder runs where a blocking file call may run. The lane hands one to
    /// each work it runs (`run`), borrowed: it cannot be copied or kept, so work on the event loop has none,
    /// and the compiler keeps a state file's blocking calls off the loop. The one other source is
    /// `beforeServing`, for what runs with no event loop serving.
    struct Context: ~Copyable {
        fileprivate init() {}

        /// A context for a process or a phase with no event loop serving: a command that runs without the
        /// daemon, and the daemon's start before its loop serves (`OffLoop.serving`). Called once the loop
        /// serves, on its thread, it stops the process in every build (`LaneContextTests` scans the sources so
        /// that only the commands and the daemon's assemblies call it).
        static func beforeServing() -> Context {
            precondition(
                !(OffLoop.serving.load(ordering: .relaxed) && OffLoop.onLoop.withLock({ $0 })()),
                "a state file's blocking work asked for on the serving event loop")
            return Context()
        }
    }

    private let pool: NIOThreadPool
    /// How long a stop waits for a write that may be given up (`write`'s `boundedAtStop`).
    private let stopBound: StopBound

    /// `name`: the lane's thread's (15 characters at most), for `top -H` and the logs of the flash tests.
    init(name: String, stopBound: StopBound) {
        self.stopBound = stopBound
        pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        pool.submit { _ in POSIX.nameThisThread(name) }
    }

    deinit { pool.shutdownGracefully { _ in } }

    /// Runs `work` on the lane after every write submitted before it and returns its result. The write is
    /// carried out even when the caller's task is cancelled meanwhile (a stop): a write that was asked for is
    /// never cut short half-way, and whoever asked hears how it went.
    func run<T: Sendable>(
        isolation: isolated (any Actor)? = #isolation,
        _ work: @escaping @Sendable (borrowing Context) throws(AgentError) -> T
    ) async throws(AgentError) -> T {
        let result: Result<T, AgentError> = await withCheckedContinuation(isolation: isolation) { continuation in
            pool.submit { state in
                guard case .active = state else {
                    continuation.resume(returning: .failure(AgentError(.storage, "the disk lane has stopped")))
                    return
                }
                do throws(AgentError) {
                    let context = Context()
                    continuation.resume(returning: .success(try work(context)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    /// Where a state file lives, which says how the lane writes it and what a stopping caller waits for.
    enum Medium: Sendable {
        /// The flash of the state directory: written durably (fsync of the file and of its directory); a caller
        /// cancelled meanwhile (a stop) hears of the write at the new file's rename.
        case flash
        /// The runtime directory's tmpfs: written without fsync (no power cut leaves half of a file that no boot
        /// keeps), the directory made (0700) when missing; a caller cancelled meanwhile (a stop) returns at once,
        /// so a stop never waits for such a write behind a flush of the flash. The write still runs.
        case tmpfs
    }

    /// Writes `bytes` to `path` atomically (`POSIX.writeFileAtomically`) on the lane, in order with the work
    /// submitted before it: a state file's store's `save` (`StateStore`), the lane's one write. The caller is
    /// answered once, when the write has run, or earlier once its task is cancelled (a stop), as `medium` says.
    ///
    /// On the flash, a cancelled caller hears of the write once the new file is in place (its rename), without
    /// waiting for the directory's flush, which the lane still does: on a flash whose flushes stall for seconds a
    /// stop stays within its bound and the file is written (the rename is what a restart reads; the kernel writes
    /// the directory back on its own, at the latest at the shutdown's sync). Only the power failing in those
    /// seconds can bring the old file back, as it could before the write.
    ///
    /// `boundedAtStop` (the flash): the cancelled caller waits for the rename only until the stop's bound
    /// (`StopBound`); a write that has not reached its rename by then is given up: it is never renamed (its temp
    /// file goes), the file keeps what it held, and the caller hears that it was not written. For the files whose
    /// write a restart can do again (the outbox, the status record); the tokens' write, which may hold the only
    /// copy of a rotated refresh token, is waited for until its rename however long its flush stalls.
    func write(
        isolation: isolated (any Actor)? = #isolation, _ bytes: [UInt8], to path: String, on medium: Medium,
        boundedAtStop: Bool = false
    ) async throws(AgentError) {
        let ending = EarlyEnding(
            atCancellation: medium == .tmpfs, stopBound: medium == .flash && boundedAtStop ? stopBound : nil)
        let result: Result<Void, AgentError> = await withTaskCancellationHandler {
            await withCheckedContinuation(isolation: isolation) { continuation in
                ending.waiting(continuation)
                pool.submit { state in
                    guard case .active = state else {
                        ending.finish(.failure(AgentError(.storage, "the disk lane has stopped")))
                        return
                    }
                    do throws(AgentError) {
                        if medium == .tmpfs { try Self.makeParentDirectory(of: path, on: Context()) }
                        try POSIX.writeFileAtomically(
                            path, bytes, durable: medium == .flash, mayRename: { ending.mayRename() }
                        ) { ending.renamed() }
                        ending.finish(.success(()))
                    } catch {
                        ending.finish(.failure(error))
                    }
                }
            }
        } onCancel: {
            ending.cancelled()
        }
        try result.get()
    }

    /// The runtime directory (a tmpfs, empty after a boot) made (0700) when missing, before a write into it.
    static func makeParentDirectory(of path: String, on lane: borrowing Context) throws(AgentError) {
        let directory = POSIX.parentDirectory(of: path)
        if try POSIX.status(directory) == nil { try POSIX.makeDirectory(directory, 0o700) }
    }

    /// The one answer of a write on the lane (`write`): its end, or, once the caller is cancelled, the new file's
    /// rename (the flash) or the cancellation itself (`atCancellation`: the tmpfs), whichever comes first; with a
    /// `stopBound`, at the latest its deadline, when a write not yet at its rename is given up.
    private final class EarlyEnding: Sendable {
        private struct State {
            var continuation: CheckedContinuation<Result<Void, AgentError>, Never>?
            var renamed = false
            /// The lane has begun the rename: the write can no longer be given up.
            var renaming = false
            var givenUp = false
            var cancelled = false
            var answered = false
            /// The wait for the stop's deadline, cancelled once the caller is answered: a timer left on the event
            /// loop would hold the ending process until its deadline.
            var deadline: Task<Void, Never>?
        }
        private let state = Mutex(State())
        private let atCancellation: Bool
        private let stopBound: StopBound?

        init(atCancellation: Bool = false, stopBound: StopBound? = nil) {
            self.atCancellation = atCancellation
            self.stopBound = stopBound
        }

        func waiting(_ continuation: CheckedContinuation<Result<Void, AgentError>, Never>) {
            state.withLock { $0.continuation = continuation }
            answerEarlyIfDue()
        }

        func renamed() {
            state.withLock { $0.renamed = true }
            answerEarlyIfDue()
        }

        func cancelled() {
            state.withLock { $0.cancelled = true }
            answerEarlyIfDue()
            guard let deadline = stopBound?.deadline() else { return }
            // Unstructured: the caller's continuation is what waits; this only answers it at the deadline.
            let timer = Task { [self] in
                try? await ContinuousClock().loopSleep(until: deadline)
                giveUp()
            }
            let answered = state.withLock { state in
                if !state.answered { state.deadline = timer }
                return state.answered
            }
            if answered { timer.cancel() }
        }

        /// The lane is about to rename the new file into place: false when the write was given up (the lane then
        /// removes the temp file instead).
        func mayRename() -> Bool {
            state.withLock { state in
                guard !state.givenUp else { return false }
                state.renaming = true
                return true
            }
        }

        /// The stop's deadline: a write not yet at its rename is given up and its caller told so.
        private func giveUp() {
            let continuation = state.withLock { state -> CheckedContinuation<Result<Void, AgentError>, Never>? in
                guard !state.answered, !state.renaming, let continuation = state.continuation else { return nil }
                state.givenUp = true
                state.answered = true
                state.deadline = nil
                return continuation
            }
            continuation?.resume(
                returning: .failure(
                    AgentError(.storage, "not written: the agent stopped while the flash held the write back")))
        }

        func finish(_ result: Result<Void, AgentError>) {
            answer(result) { _ in true }
        }

        private func answerEarlyIfDue() {
            let atCancellation = atCancellation
            answer(.success(())) { $0.cancelled && ($0.renamed || atCancellation) }
        }

        private func answer(_ result: Result<Void, AgentError>, when condition: (State) -> Bool) {
            let (continuation, timer) = state.withLock { state in
                guard !state.answered, condition(state), let continuation = state.continuation else {
                    return (CheckedContinuation<Result<Void, AgentError>, Never>?.none, Task<Void, Never>?.none)
                }
                state.answered = true
                defer { state.deadline = nil }
                return (continuation, state.deadline)
            }
            timer?.cancel()
            continuation?.resume(returning: result)
        }
    }
}
