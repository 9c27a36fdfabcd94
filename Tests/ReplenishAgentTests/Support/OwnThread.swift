import Foundation
import Testing

/// Runs each test of a suite on a thread of its own instead of Swift Concurrency's cooperative pool: for the
/// process-level suites, whose tests block while they poll the agent and the emulator (files, exits).
///
/// On the cooperative pool (one thread per core) two blocked process tests hold the whole pool of a two-core
/// machine, and every other test waits for them. No test depends on that any more for its result (the timing
/// suites drive their services by steps on a manual clock and never wait in real time), so this trait is about
/// time only: the full `swift test --skip-build` took 161 s without it and 92 s with it on this machine
/// (2026-11-25, 2 cores), with the same results.
struct OwnThread: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // The suite itself is scoped too (testCase nil); only its test cases need the thread.
        guard testCase != nil else { return try await function() }
        let executor = ThreadExecutor(name: test.name)
        defer { executor.stop() }
        try await withTaskExecutorPreference(executor) { try await function() }
    }
}

extension Trait where Self == OwnThread {
    /// See `OwnThread`.
    static var onOwnThread: Self { OwnThread() }
}

/// A task executor with one thread of its own, which runs the jobs it is given in order until stopped.
final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopped = false
    private var finished = false

    init(name: String) {
        let thread = Thread { [self] in loop() }
        thread.name = name
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        guard !finished else {
            // Work that outlives its test (a late continuation) runs on the shared pool.
            condition.unlock()
            return globalConcurrentExecutor.enqueue(job)
        }
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Lets the thread end once the jobs queued so far have run.
    func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopped { condition.wait() }
            if jobs.isEmpty {
                finished = true
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
