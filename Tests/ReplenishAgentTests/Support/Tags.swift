import Testing

/// What a suite needs, so that a developer runs the fast part alone and CI runs everything (docs/testing.md):
/// `scripts/unit-tests.sh` runs the `.unit` suites (it reads the tags from the suites' declarations, since
/// swift-testing's command line filters by name).
extension Tag {
    /// In this process only: manual clocks, doubles, files in a temporary directory. Seconds in all.
    @Tag static var unit: Self
    /// Starts the agent, the emulator or other programs as processes and polls them with bounded timeouts.
    @Tag static var process: Self
    /// A process test that runs for minutes (hundreds of presses or kills).
    @Tag static var soak: Self
}
