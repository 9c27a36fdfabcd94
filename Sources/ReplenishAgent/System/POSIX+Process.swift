import CProcess

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The process's own facts and settings, and the clocks, as typed calls for the rest of the agent.
extension POSIX {
    /// Names the calling thread (`prctl(PR_SET_NAME)`; 15 characters are kept), as `top -H` and
    /// `/proc/<pid>/task/*/comm` show it.
    static func nameThisThread(_ name: String) { _ = cprocess_set_thread_name(name) }

    /// This process's id.
    static func processID() -> Int32 { getpid() }

    /// This process's effective user id: the agent's uid when it runs as the agent.
    static func effectiveUserID() -> UserID { geteuid() }

    /// An environment variable's value, or nil when it is not set.
    static func environment(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }

    /// Sets the file-creation mask (`umask`); returns the previous one.
    @discardableResult
    static func setFileCreationMask(_ mask: FileMode) -> FileMode { umask(mask) }

    /// Writes one line's bytes to standard output (`1`) or standard error (`2`), unbuffered; a failure is
    /// ignored (there is nowhere left to report it).
    static func writeStandard(_ stream: StandardStream, _ bytes: [UInt8]) {
        writeAll(bytes, to: stream.rawValue)
    }

    /// The two streams a command prints to.
    enum StandardStream: Int32, Sendable {
        case output = 1
        case error = 2
    }

    /// Unblocks every signal in this thread. A process started by a test runner (or any parent) may inherit
    /// a blocked mask, and then SIGTERM would never reach it. SIGTERM and SIGINT stay blocked when the program's
    /// entry point gave them to the main thread (`TerminationSignals`): there they are taken, not left to kill.
    static func unblockAllSignals() { TerminationSignals.unblockAllButOwned() }

    /// Caps glibc's malloc arenas: each thread that allocates would otherwise get an arena of its own (up to
    /// 8 per core), each holding freed memory of its own; the agent's few threads allocate little and rarely.
    static func limitMallocArenas(_ count: Int32) { _ = cprocess_limit_malloc_arenas(count) }

    /// Turns transparent huge pages off for the process (`prctl(PR_SET_THP_DISABLE)`). On a kernel whose THP
    /// mode is `always` (Debian's), an anonymous region that spans an aligned 2 MB range (the heap, the relocated
    /// data) may be backed by one 2 MB page however little of it is used: measured in the booted bookworm VM,
    /// the agent's anonymous RSS went from 3.2 to 5.2 MB when a change of 8 kB in the binary moved its layout.
    /// The agent has no use for huge pages. Returns false when prctl failed (an old kernel): nothing else changes.
    @discardableResult
    static func setTransparentHugePages(enabled: Bool) -> Bool { cprocess_set_thp_disable(enabled ? 0 : 1) == 0 }

    /// Whether transparent huge pages are off for the process (`prctl(PR_GET_THP_DISABLE)` is 1).
    static var transparentHugePagesDisabled: Bool { cprocess_get_thp_disable() == 1 }

    /// Whether the process can read its THP flag: not under qemu-user, which refuses both THP prctls (EINVAL),
    /// nor on a kernel older than 3.15.
    static var transparentHugePagesFlagReadable: Bool { cprocess_get_thp_disable() >= 0 }

    /// Makes a crash print one line on stderr (the journal) before the process ends: the signal, where, the return
    /// addresses as offsets into the binary, and `build` (Sources/CProcess/crashreport.c). The agent writes no
    /// core file and the device binary has no unwind tables, so this line is what an operator gets. False where
    /// it is not available (a CPU other than x86_64 and arm64).
    @discardableResult
    static func installCrashReport(build: String) -> Bool { cprocess_install_crash_report("build " + build) == 0 }

    /// Sets RLIMIT_CORE to 0 (soft and hard), so no core file of this process can ever be written.
    static func disableCoreDumps() {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
    }

    /// Makes the process not dumpable (`prctl(PR_SET_DUMPABLE, 0)`): no core dump at all, even through a core
    /// pipe (`kernel.core_pattern` `|…`, which ignores RLIMIT_CORE), and no ptrace attach, `/proc/<pid>/mem` or
    /// `environ` for the agent's own user (the kernel makes those files root's); the memory holds the tokens.
    /// `execve` of a normal binary sets it back, so it is made at the start of `run`. A failure (no prctl) is
    /// returned for the log: the agent still runs, as with the core limit alone.
    @discardableResult
    static func disableDumping() -> Bool { setDumpable(false) }

    /// Sets the dumpable flag (`disableDumping`; tests set it back); false when prctl failed.
    @discardableResult
    static func setDumpable(_ dumpable: Bool) -> Bool { cprocess_set_dumpable(dumpable ? 1 : 0) == 0 }

    /// Whether the process is dumpable (`prctl(PR_GET_DUMPABLE)` is 1).
    static var isDumpable: Bool { cprocess_get_dumpable() == 1 }

    /// Seconds since the Unix epoch (wall clock): used only for absolute expiries and timestamps that must
    /// survive a restart. Waits use a monotonic `Clock`.
    static func wallTime() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// `seconds` since the Unix epoch as UTC text in strftime's `format` (gmtime_r), or nil where the C library
    /// cannot represent that time. Not FoundationEssentials' format styles: they bring calendars and the regex
    /// engine's entry points into the working set for one fixed pattern (issue #21).
    static func utcText(_ seconds: Int64, format: String) -> String? {
        var time = time_t(seconds)
        var parts = tm()
        guard gmtime_r(&time, &parts) != nil else { return nil }
        var text = [CChar](repeating: 0, count: 64)
        let length = strftime(&text, text.count, format, &parts)
        guard length > 0 else { return nil }
        return String(decoding: text[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `CLOCK_MONOTONIC` now, as time since its (boot-time) origin: the clock the kernel stamps GPIO edge events
    /// with. Not `ContinuousClock`: on Linux that reads `CLOCK_BOOTTIME` (the Swift runtime's `swift_get_time`),
    /// which also counts time suspended; so a kernel timestamp is only ever turned into an age against this
    /// clock, never compared with a `ContinuousClock` instant.
    static func monotonicNow() -> Duration { now(CLOCK_MONOTONIC) }

    /// `CLOCK_BOOTTIME` now (what `ContinuousClock` reads on Linux), for the test that shows which clock that is.
    static func bootTimeNow() -> Duration { now(CLOCK_BOOTTIME) }

    private static func now(_ clock: clockid_t) -> Duration {
        var now = timespec()
        clock_gettime(clock, &now)
        return .seconds(Int64(now.tv_sec)) + .nanoseconds(Int64(now.tv_nsec))
    }
}
