/// Facts about the wall clock (CLOCK_REALTIME) that the agent's rules depend on. A board without a
/// battery-backed clock starts in 1970 until NTP sets the time; anything judged by wall time before then
/// is wrong by decades.
enum WallClock {
    /// 2026-01-01T00:00:00Z: no wall time before this can be right, because this build did not exist yet.
    /// A time stamp or a "now" before it was taken from a clock that was not set.
    static let earliestPlausible = 1_767_225_600.0

    /// True when `time` could have come from a set clock.
    static func isPlausible(_ time: Double) -> Bool { time >= earliestPlausible }
}
