import Logging
import ServiceLifecycle
import Testing

@testable import ReplenishAgent

/// A part whose job is done before the stop (`mayEnd`) leaves the group running, and a stop that begins while it
/// finishes its job still ends the group without an error: the group counts the return of any part but the one
/// it is stopping as "finished unexpectedly", so the part waits for its own turn. Found in a clean-clone run: an
/// agent stopped at its start, as the clock watch ended its job, exited 1.
@Suite(.tags(.unit)) struct DaemonPartTests {
    /// Opened once: a wait after the opening passes at once (the stream is finished).
    final class Gate: Sendable {
        private let opened = Locked(false)
        private let signal = AsyncStream.makeStream(of: Void.self)

        var isOpen: Bool { opened.value }

        func open() {
            opened.value = true
            signal.continuation.finish()
        }

        func wait() async { for await _ in signal.stream {} }
    }

    /// A part that may end: its work ends once `release` opens; `ended` opens when its `run` has returned.
    struct Ending: DaemonPart {
        let release: Gate
        let workDone = Gate()
        var description: String { "ending" }
        var mayEnd: Bool { true }

        func work() async {
            await release.wait()
            workDone.open()
        }
    }

    /// A part that runs until the stop. At its turn of the stop (the group stops the parts in reverse, so it is
    /// first) it lets `ending` finish its job, then gives that part's return every chance to reach the group.
    struct Running: DaemonPart {
        let ending: Ending
        let ended: Gate
        var description: String { "running" }

        func work() async {
            // Its stop cancels this work as well: the wait ends either way.
            try? await gracefulShutdown()
            ending.release.open()
            await ending.workDone.wait()
            for _ in 0..<1_000 where !ended.isOpen { await Task.yield() }
        }
    }

    /// `ending`'s `run`, telling when it has returned.
    struct Observed: Service {
        let part: Ending
        let ended: Gate

        func run() async throws {
            try await part.run()
            ended.open()
        }
    }

    func group(_ ending: Ending, _ running: Running, ended: Gate) -> ServiceGroup {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let configured = ending.groupConfiguration
        let observed = ServiceGroupConfiguration.ServiceConfiguration(
            service: Observed(part: ending, ended: ended),
            successTerminationBehavior: configured.successTerminationBehavior,
            failureTerminationBehavior: configured.failureTerminationBehavior)
        return ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [observed, running.groupConfiguration], gracefulShutdownSignals: [], logger: logger))
    }

    @Test func aPartThatEndsItsJobDuringTheStopDoesNotFailTheGroup() async throws {
        let (ending, ended) = (Ending(release: Gate()), Gate())
        let group = group(ending, Running(ending: ending, ended: ended), ended: ended)
        async let run: Void = group.run()
        await group.triggerGracefulShutdown()
        try await run
        #expect(ending.workDone.isOpen && ended.isOpen)
    }

    @Test func aPartThatEndsItsJobBeforeTheStopLeavesTheGroupRunning() async throws {
        let (ending, ended) = (Ending(release: Gate()), Gate())
        let running = Running(ending: ending, ended: ended)
        let group = group(ending, running, ended: ended)
        async let run: Void = group.run()
        ending.release.open()
        await ending.workDone.wait()
        // The group still runs its other part, and the ended part waits for its turn of the stop.
        for _ in 0..<1_000 { await Task.yield() }
        #expect(!ended.isOpen)
        await group.triggerGracefulShutdown()
        try await run
        #expect(ended.isOpen)
    }
}
