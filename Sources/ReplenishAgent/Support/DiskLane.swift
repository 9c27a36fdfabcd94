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

    /// Writes `bytes` to `path` atomically and durably (`POSIX.writeFileAtomically`): a state file's store's
    /// `save` (`StateStore`), the lane's one write. A caller whose task is cancelled (a stop) hears of the write
    /// once the new file is in place (its rename), without waiting for the directory's flush, which the lane
    /// still does: on a flash whose flushes stall for seconds a stop stays within its bound and the file is
    /// written (the rename is what a restart reads; the kernel writes the directory back on its own, at the latest
    /// at the shutdown's sync). Only the power failing in those seconds can bring the old file back, as it could
    /// before the write.
    ///
    /// `boundedAtStop`: the cancelled caller waits for the rename only until the stop's bound (`StopBound`); a
    /// write that has not reached its rename by then is given up: it is never renamed (its temp file goes), the
    /// file keeps what it held, and the caller hears that it was not written. For the files whose write a restart
    /// can do again (the outbox, the status record); the tokens' write, which may hold the only copy of a rotated
    /// refresh token, is waited for until its rename however long its flush stalls.
    func write(
        isolation: isolated (any Actor)? = #isolation, _ bytes: [UInt8], to path: String, boundedAtStop: Bool = false
    ) async throws(AgentError) {
        let ending = EarlyEnding(stopBound: boundedAtStop ? stopBound : nil)
        try await submit(isolation: isolation, ending) { _ throws(AgentError) in
            try POSIX.writeFileAtomically(path, bytes, mayRename: { ending.mayRename() }) { ending.renamed() }
        }
    }

    /// Runs `work` (a write to the runtime directory, a tmpfs: nothing durable) on the lane, in order with the
    /// writes submitted before it, and returns when it has run; a caller cancelled meanwhile (a stop) returns at
    /// once, so a stop never waits for such a write behind a flush of the flash. The write still runs.
    func runUnawaitedOnStop(
        isolation: isolated (any Actor)? = #isolation,
        _ work: @escaping @Sendable (borrowing Context) throws(AgentError) -> Void
    ) async throws(AgentError) {
        try await submit(isolation: isolation, EarlyEnding(atCancellation: true), work)
    }

    /// Runs `work` on the lane and answers the caller once, when `ending` says (the work's end, or earlier once
    /// the caller is cancelled).
    private func submit(
        isolation: isolated (any Actor)?, _ ending: EarlyEnding,
        _ work: @escaping @Sendable (borrowing Context) throws(AgentError) -> Void
    ) async throws(AgentError) {
        let result: Result<Void, AgentError> = await withTaskCancellationHandler {
            await withCheckedContinuation(isolation: isolation) { continuation in
                ending.waiting(continuation)
                pool.submit { state in
                    guard case .active = state else {
                        ending.finish(.failure(AgentError(.storage, "the disk lane has stopped")))
                        return
                    }
                    do throws(AgentError) {
                        let context = Context()
                        try work(context)
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

    /// The one answer of a write on the lane (`write`, `runUnawaitedOnStop`): its end, or, once the caller is
    /// cancelled, the new file's rename (`write`) or the cancellation itself (`atCancellation`), whichever
    /// comes first; with a `stopBound`, at the latest its deadline, when a write not yet at its rename is given up.
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
