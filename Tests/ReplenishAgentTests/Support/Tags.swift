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
    /// A unit suite on real sockets with real deadlines: not run under qemu-user emulation (scripts/arm64.sh),
    /// where its deadlines do not hold. No suite has it today (the local HTTP server's deadlines are tested on
    /// NIO's EmbeddedChannel); `scripts/unit-tests.sh --list-emulated` keeps honouring it.
    @Tag static var realTime: Self
}
