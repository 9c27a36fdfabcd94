import Testing

@testable import ReplenishAgent

/// The process-wide settings `run` makes before anything else, checked on this (test) process.
@Suite(.tags(.unit)) struct ProcessSettingsTests {
    /// `run` makes the agent not dumpable: no core (not even through a core pipe, which ignores RLIMIT_CORE),
    /// no ptrace or /proc/<pid>/mem by the agent's own user. Set back afterwards: the test runner is a process
    /// like any other.
    @Test func disablingDumpingMakesTheProcessNotDumpable() {
        let before = POSIX.isDumpable
        POSIX.disableDumping()
        let after = POSIX.isDumpable
        POSIX.setDumpable(before)
        #expect(before)
        #expect(!after)
        #expect(POSIX.isDumpable == before)
    }

    /// The entry point turns transparent huge pages off: a 2 MB page for a few kB of heap is memory a small
    /// device does not have. Set back afterwards. Not under qemu-user (the arm64 unit run), which refuses the
    /// THP prctls; `HardeningTests` checks the running agent on a real kernel.
    @Test(.enabled(if: POSIX.transparentHugePagesFlagReadable, "the kernel (or qemu-user) has no THP prctl"))
    func transparentHugePagesCanBeTurnedOffAndOn() {
        let before = POSIX.transparentHugePagesDisabled
        #expect(POSIX.setTransparentHugePages(enabled: false))
        let off = POSIX.transparentHugePagesDisabled
        #expect(POSIX.setTransparentHugePages(enabled: !before))
        #expect(off)
        #expect(POSIX.transparentHugePagesDisabled == before)
    }
}
