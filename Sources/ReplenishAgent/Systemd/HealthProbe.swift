import Synchronization

/// One check that a part of the agent still runs. A check that hangs (a wedged event loop never runs the
/// probe's job) stops the pings just as a failed one does: either way systemd restarts the agent.
struct HealthProbe: Sendable {
    let name: String
    let check: @Sendable () async -> Bool
}

/// Passes while a counter moves between two checks: a thread that counts a beat every so often (the GPIO
/// thread, whose poll(2) times out at half the ping interval while a watchdog is on) proves it still runs.
/// The first check passes (there is nothing to compare yet).
final class HeartbeatProbe: Sendable {
    private let beats: @Sendable () -> UInt64
    private let last = Mutex<UInt64?>(nil)

    init(beats: @escaping @Sendable () -> UInt64) { self.beats = beats }

    func check() -> Bool {
        let now = beats()
        return last.withLock { last in
            defer { last = now }
            guard let previous = last else { return true }
            return now != previous
        }
    }
}
