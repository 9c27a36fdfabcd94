/// Facts about the wall clock (CLOCK_REALTIME) that the agent's rules depend on. A board without a
/// battery-backed clock starts in 1970 (or at the image's build time) until NTP sets the time; anything judged
/// by wall time before then (a token's expiry, the date in device status, a certificate's validity) is wrong.
enum WallClock {
    /// 2026-01-01T00:00:00Z: no wall time before this can be right, because this build did not exist yet.
    /// A time stamp or a "now" before it was taken from a clock that was not set.
    static let earliestPlausible = 1_767_225_600.0

    /// The file systemd-timesyncd creates once it has synchronised the clock.
    static let timesyncMarker = "/run/systemd/timesync/synchronized"

    /// True when an NTP client said it synchronised the clock during this boot: systemd-timesyncd's marker
    /// (another client can create the same file once it has synchronised, as docs/time-sync.md describes). A
    /// plausible time is not enough after a reboot: fake-hwclock and timesyncd's clock file restore the
    /// shutdown's time, which looks right and is not.
    /// The marker is in `/run`, a tmpfs (`OffLoop.Medium.memory`): the look may run on the event loop.
    static func isSynchronized() -> Bool { POSIX.exists(timesyncMarker, .memory) }

    /// Seconds since this boot began (CLOCK_BOOTTIME: suspended time included, never set by anyone).
    static func sinceBoot() -> Double {
        let components = POSIX.bootTimeNow().components
        return Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// True when `time` could have come from a set clock.
    static func isPlausible(_ time: Double) -> Bool { time >= earliestPlausible }

    /// True when the wall clock can be trusted: it shows a time that is not before this build, or
    /// systemd-timesyncd says it has synchronised it. (The kernel's `adjtimex` state is not read: Glibc's
    /// module does not bring `sys/timex.h` to Swift, and the unit's ProtectClock= filter refuses the call.)
    static func isTrusted() -> Bool {
        isPlausible(POSIX.wallTime()) || POSIX.exists(timesyncMarker, .memory)
    }
}
