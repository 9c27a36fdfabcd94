#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension AgentCommand {
    /// The program's entry point. `@main` on `AgentCommand` calls `main()`, and the type's own method is chosen
    /// over `AsyncParsableCommand`'s, so this runs first, on the main thread, before any other thread exists:
    /// - the long-running commands (`run`, `gpio-watch`) get SIGTERM and SIGINT blocked here, and so in every
    ///   thread made later; the main thread then takes them with sigwait (`TerminationSignals`) while the
    ///   command runs as a task;
    /// - Swift Concurrency's jobs and timers go to the one event-loop thread (`LoopExecutor`), so libdispatch
    ///   never starts its thread pool (and its once-a-second wakeup);
    /// - malloc keeps one arena for every thread (`POSIX.limitMallocArenas`);
    /// - no transparent huge pages (`POSIX.setTransparentHugePages`), before the heap grows.
    @MainActor static func main() async {
        let command = CommandLine.arguments.dropFirst().first
        let longRunning = command == "run" || command == "gpio-watch"
        if longRunning { TerminationSignals.block() }
        POSIX.limitMallocArenas(1)
        POSIX.setTransparentHugePages(enabled: false)
        LoopExecutor.install()
        guard longRunning else {
            await main(nil)
            return
        }
        Task.detached {
            await main(nil)
            Glibc.exit(0)
        }
        TerminationSignals.takeOnMainThread()
    }
}
