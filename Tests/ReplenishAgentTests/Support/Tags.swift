import Testing

/// What a suite needs, so that a developer runs the fast part alone and CI runs everything
/// (README "Tests"): `swift test --skip-build --filter tag:unit`.
extension Tag {
    /// In this process only: manual clocks, doubles, files in a temporary directory. Seconds in all.
    @Tag static var unit: Self
    /// Starts the agent, the emulator or other programs as processes and polls them with bounded timeouts.
    @Tag static var process: Self
    /// A process test that runs for minutes (hundreds of presses or kills).
    @Tag static var soak: Self
}
