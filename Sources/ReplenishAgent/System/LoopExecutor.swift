import CProcess
import NIOCore
import NIOPosix
import Synchronization

// The hooks are written for the runtimes of Swift 6.2 and 6.3, and only they build them: every gate in this file is
// `compiler(>=6.2) && compiler(<6.4)`, or `compiler(>=6.3) && compiler(<6.4)` for 6.3's executor SPI. Any other
// compiler builds an agent that stays on libdispatch and says so at start (`install()`), as SwiftNIO bounds its own
// takeover (swift-nio 2.101 PosixSingletons+ConcurrencyTakeOver.swift: `#if compiler(<6.6)`, else `return false`).
#if compiler(>=6.3) && compiler(<6.4)
    @_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency
#endif

/// Swift Concurrency on the agent's one SwiftNIO event-loop thread, instead of libdispatch's thread pool.
///
/// On Linux the default global executor is libdispatch: once a task has run on it, libdispatch keeps a thread
/// that wakes about once a second for ever (its worker-pool monitor), and a timer (`Task.sleep`, a clock's
/// `sleep`) goes through `dispatch_after`. Here every job goes to `MultiThreadedEventLoopGroup.singleton`,
/// made with one loop, through the runtime's hooks: `swift_task_enqueueGlobal_hook` for jobs to run now (what
/// SwiftNIO's `NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor` does; it
/// finds the hook with dlsym, which fails when the Swift runtime is linked statically, as on the device, so
/// the hooks' addresses come from the linker, `CProcess`), and the hooks of `swift_task_enqueueGlobalWithDelay`
/// and `…WithDeadline` (what every sleep becomes) as a task scheduled on that loop (its timer is the loop's own
/// epoll timeout). The pairing
/// endpoints and the control socket run on the same loop; nothing the agent runs as a task blocks (libcurl
/// calls run on their lanes' threads, `CurlHTTPClient`), so they are never held up.
enum LoopExecutor {
    /// Installs the hooks; must run on the main thread before any task has run on the global executor (the
    /// program's entry point, `AgentCommand.main`) and only once. Returns `.libdispatch` when they were not
    /// installed (another hook was there first, the runtime has none, or it is not one they were checked
    /// against): then libdispatch stays the executor, and the daemon logs `fallbackWarning` at start.
    ///
    /// What each compiler's runtime needs (both measured idle, docs/benchmarks.md):
    /// - Swift 6.2 (the arm64 build, Debian's `swiftlang` 6.2.3): the hooks carry every job, but a `Task.sleep`
    ///   goes to libdispatch's `dispatch_after` past them (seen with gdb), so the agent's services sleep with
    ///   `Clock.loopSleep`, a timer of the loop.
    /// - Swift 6.3 (the host build): a sleep first asks the current scheduling executor, which in an actor's job is
    ///   the default executor, so the loop is made the default executor too (`_createExecutors`, 6.3's SPI).
    /// Any other compiler (older than 6.2, or 6.4 and newer, whose runtime nobody has checked these hooks against)
    /// installs nothing: `.libdispatch`, so such a build runs, and says in its log that it runs on libdispatch.
    @discardableResult
    static func install() -> Installed {
        let installed = installHooks()
        outcome.withLock { $0 = installed }
        return installed
    }

    /// What `install()` did, for the daemon's start-up log line (a fallback shows up in the journal, not only in
    /// power figures).
    static var installed: Installed { outcome.withLock { $0 } }
    private static let outcome = Mutex(Installed.notTried)

    enum Installed: Sendable {
        case notTried
        /// Every job and timer on the loop: through the runtime's hooks (6.2), or the hooks and the executor
        /// factory (6.3).
        case loop(String)
        /// libdispatch stays the executor, with the reason.
        case libdispatch(String)

        var isLoop: Bool {
            if case .loop = self { true } else { false }
        }

        /// The warning for the daemon's log when the loop is not the executor (nil when it is): a device that
        /// fell back to libdispatch would otherwise show it only in its power figures.
        var fallbackWarning: String? {
            isLoop
                ? nil
                : "Swift Concurrency runs on libdispatch (\(description)): its worker-pool thread will wake the CPU about once a second"
        }

        var description: String {
            switch self {
            case .notTried: "libdispatch (the loop executor was not installed)"
            case .loop(let how): "one event loop, \(how)"
            case .libdispatch(let why): "libdispatch (fallback: \(why))"
            }
        }
    }

    private static func installHooks() -> Installed {
        NIOSingletons.groupLoopCountSuggestion = 1
        #if compiler(>=6.2) && compiler(<6.4)
            return installCheckedHooks()
        #else
            return .libdispatch(
                "this build's Swift runtime (not 6.2's or 6.3's) is not one the loop executor was checked against")
        #endif
    }

    #if compiler(>=6.2) && compiler(<6.4)
        /// The hooks of the Swift 6.2 and 6.3 runtimes.
        private static func installCheckedHooks() -> Installed {
            // SAFETY: the addresses of the runtime's three hook variables (each one function pointer, nil until set),
            // written once here, on the main thread, before any job exists; read by the runtime's C code only.
            let (now, delayed, deadline) = (
                cprocess_enqueue_global_hook(), cprocess_enqueue_global_with_delay_hook(),
                cprocess_enqueue_global_with_deadline_hook()
            )
            guard let now, let delayed, let deadline else {
                return .libdispatch("the runtime has no global-executor hooks")
            }
            guard now.pointee == nil, delayed.pointee == nil, deadline.pointee == nil else {
                return .libdispatch("another global-executor hook was installed first")
            }
            let runNow: NowHook = { job, _ in enqueueOnLoop(job) }
            let runAfter: DelayHook = { nanoseconds, job, _ in scheduleOnLoop(job, afterNanoseconds: nanoseconds) }
            let runAt: DeadlineHook = {
                seconds, nanoseconds, toleranceSeconds, toleranceNanoseconds, clock, job, original in
                if !scheduleOnLoop(job, seconds: seconds, nanoseconds: nanoseconds, clock: clock) {
                    original(seconds, nanoseconds, toleranceSeconds, toleranceNanoseconds, clock, job)
                }
            }
            // SAFETY: each variable holds one SWIFT_CC(swift) function pointer, which a @convention(thin) function
            // that captures nothing is; stored as the runtime reads it (as SwiftNIO stores its hook).
            UnsafeMutableRawPointer(now).assumingMemoryBound(to: NowHook?.self).pointee = runNow
            // SAFETY: as above.
            UnsafeMutableRawPointer(delayed).assumingMemoryBound(to: DelayHook?.self).pointee = runAfter
            // SAFETY: as above.
            UnsafeMutableRawPointer(deadline).assumingMemoryBound(to: DeadlineHook?.self).pointee = runAt
            LoopTaskExecutor.isInstalled.store(true, ordering: .releasing)
            #if compiler(>=6.3) && compiler(<6.4)
                // Since Swift 6.3 a sleep asks the current scheduling executor, and in an actor's job (a default actor
                // does not schedule) that is the default executor, libdispatch's, whatever the hooks: it becomes the
                // loop.
                _createExecutors(factory: LoopExecutorFactory.self)
                return .loop("runtime hooks and default executor (Swift 6.3)")
            #else
                // Swift 6.2: jobs through the hooks above; sleeps are the services' `Clock.loopSleep`.
                return .loop("runtime hooks (Swift 6.2)")
            #endif
        }
    #endif

    #if compiler(>=6.3) && compiler(<6.4)
        /// The main executor as the platform has it (the main thread), the loop as the default executor.
        private enum LoopExecutorFactory: ExecutorFactory {
            static var mainExecutor: any MainExecutor { PlatformExecutorFactory.mainExecutor }
            static var defaultExecutor: any TaskExecutor { LoopTaskExecutor.shared }
        }
    #endif

    /// `swift_task_enqueueGlobal_hook`'s type: the job, the runtime's own implementation.
    private typealias NowHook = @convention(thin) (UnownedJob, @convention(thin) (UnownedJob) -> Void) -> Void

    /// `swift_task_enqueueGlobalWithDelay_hook`'s type: the delay in nanoseconds, the job, the runtime's own
    /// implementation (SWIFT_CC(swift), as SwiftNIO declares the hook of `swift_task_enqueueGlobal`).
    private typealias DelayHook =
        @convention(thin) (UInt64, UnownedJob, @convention(thin) (UInt64, UnownedJob) -> Void) -> Void
    /// `swift_task_enqueueGlobalWithDeadline_hook`'s type: deadline seconds and nanoseconds, tolerance seconds
    /// and nanoseconds, the clock (1 continuous, 2 suspending), the job, the runtime's own implementation.
    private typealias DeadlineHook =
        @convention(thin) (
            Int64, Int64, Int64, Int64, Int32, UnownedJob,
            @convention(thin) (Int64, Int64, Int64, Int64, Int32, UnownedJob) -> Void
        ) -> Void
}

/// Runs `job` on the loop (the hook of jobs to run now).
private func enqueueOnLoop(_ job: UnownedJob) { LoopTaskExecutor.shared.run(job) }

/// Runs `job` on the loop after `nanoseconds` (the delay hook). Free functions, not static methods: a hook is a
/// thin function pointer, whose body may refer to nothing but globals.
private func scheduleOnLoop(_ job: UnownedJob, afterNanoseconds nanoseconds: UInt64) {
    scheduleOnLoop(job, in: .nanoseconds(Int64(clamping: nanoseconds)))
}

/// Runs `job` on the loop at a deadline of the continuous (1) or suspending (2) clock, as time since the clock's
/// origin (the deadline hook); false for another clock, which the runtime's own implementation then takes.
private func scheduleOnLoop(_ job: UnownedJob, seconds: Int64, nanoseconds: Int64, clock: Int32) -> Bool {
    let sinceOrigin = Duration.seconds(seconds) + .nanoseconds(nanoseconds)
    switch clock {
    case 1: scheduleOnLoop(job, in: ContinuousClock.now.duration(to: instant(sinceOrigin)))
    case 2: scheduleOnLoop(job, in: SuspendingClock.now.duration(to: instant(sinceOrigin)))
    default: return false
    }
    return true
}

/// The instant of a clock's deadline as the runtime passes it (time since the clock's origin, which is what an
/// instant of `ContinuousClock` and `SuspendingClock` holds, and all it holds).
private func instant<Instant: InstantProtocol>(_ sinceOrigin: Duration) -> Instant {
    // SAFETY: both clocks' instants are a single `Duration` since the clock's origin (unsafeBitCast traps if the
    // sizes differ), the same value the runtime's deadline was made from.
    unsafeBitCast(sinceOrigin, to: Instant.self)
}

/// Runs `job` on the loop after `delay` (at once when it is not positive).
private func scheduleOnLoop(_ job: UnownedJob, in delay: Duration) { LoopTaskExecutor.shared.run(job, after: delay) }

/// The loop as a task executor that can schedule: each job runs on the loop's thread with this executor as the
/// thread's task executor, so a sleep in it (`Task.sleep`, `clock.sleep`) asks this executor for its timer
/// (Swift 6.2 on asks the current scheduling executor first, and would otherwise ask libdispatch's).
final class LoopTaskExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: `loop` is immutable and an event loop is thread-safe.
    static let shared = LoopTaskExecutor(loop: MultiThreadedEventLoopGroup.singleton.next())

    /// The executor when `LoopExecutor.install` made it Swift Concurrency's, else nil (tests, another hook, a
    /// compiler outside 6.2 and 6.3).
    static var installed: LoopTaskExecutor? { isInstalled.load(ordering: .acquiring) ? shared : nil }
    static let isInstalled = Atomic(false)

    /// Runs `body` on the loop after `delay`, unless cancelled first (the timer is then gone at once).
    func schedule(after delay: Duration, _ body: @escaping @Sendable () -> Void) -> Scheduled<Void> {
        loop.scheduleTask(in: .nanoseconds(Self.nanoseconds(delay))) { body() }
    }

    private static func nanoseconds(_ delay: Duration) -> Int64 {
        let (seconds, attoseconds) = delay.components
        let nanoseconds = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return nanoseconds.overflow ? Int64.max : nanoseconds.partialValue &+ attoseconds / 1_000_000_000
    }

    private let loop: any EventLoop
    private let serialExecutor: UnownedSerialExecutor

    init(loop: any EventLoop) {
        self.loop = loop
        self.serialExecutor = loop.executor.asUnownedSerialExecutor()
    }

    func enqueue(_ job: consuming ExecutorJob) { run(UnownedJob(job)) }

    /// Runs `job` on the loop, now.
    func run(_ job: UnownedJob) {
        let sendable = SendableJob(job: job)
        loop.execute { self.runHere(sendable.job) }
    }

    /// Runs `job` on the loop after `delay` (at once when it is not positive).
    func run(_ job: UnownedJob, after delay: Duration) {
        let total = Self.nanoseconds(delay)
        guard total > 0 else { return run(job) }
        let sendable = SendableJob(job: job)
        loop.scheduleTask(in: .nanoseconds(total)) { self.runHere(sendable.job) }
    }

    /// Runs `job` now, on the loop's thread.
    private func runHere(_ job: UnownedJob) {
        #if compiler(>=6.3) && compiler(<6.4)
            // With this executor as the thread's task executor, a sleep asks it (a `SchedulingExecutor`) for its timer.
            job.runSynchronously(on: asUnownedTaskExecutor())
        #else
            // Swift 6.2 (no other compiler installs the loop, so none gets here) has no `SchedulingExecutor`: a
            // sleep in a job run on a task executor goes straight to libdispatch's `dispatch_after` (seen with gdb:
            // its thread, and its once-a-second monitor, appeared). Run as the loop's serial executor, as SwiftNIO
            // runs global jobs: a sleep then takes the deadline hook.
            job.runSynchronously(on: serialExecutor)
        #endif
    }
}

/// A job handed from a hook to the loop: it is run exactly once, by the loop.
private struct SendableJob: @unchecked Sendable {
    let job: UnownedJob
}

#if compiler(>=6.3) && compiler(<6.4)
    /// Swift 6.3's sleeps ask the current scheduling executor for their timer: the loop's own.
    extension LoopTaskExecutor: SchedulingExecutor {
        func enqueue<C: Clock>(_ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C)
        {
            // Every clock the agent sleeps on measures in `Duration`; any other runs at once rather than never.
            run(UnownedJob(job), after: (delay as? Duration) ?? .zero)
        }

        func enqueue<C: Clock>(_ job: consuming ExecutorJob, at instant: C.Instant, tolerance: C.Duration?, clock: C) {
            run(UnownedJob(job), after: (clock.now.duration(to: instant) as? Duration) ?? .zero)
        }
    }
#endif
