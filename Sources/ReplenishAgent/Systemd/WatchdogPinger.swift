/// Sends `WATCHDOG=1` every `interval` (half of `WatchdogSec=`) while every probe passes, and none while one
/// fails, so systemd restarts an agent whose loops stopped. It runs as a task on Swift's cooperative pool:
/// a pool with no free thread cannot run it, and the pings stop by themselves.
struct WatchdogPinger<C: Clock>: Sendable where C.Duration == Duration {
    let interval: Duration
    let clock: C
    let probes: [HealthProbe]
    /// Sends one ping.
    let ping: @Sendable () -> Void
    /// Called when a probe fails (once per failing streak, with the probe's name) or passes again (nil).
    let onHealthChange: @Sendable (String?) -> Void

    /// Until cancelled: probe, ping if healthy, sleep `interval`.
    func run() async {
        var failing: String?
        while !Task.isCancelled {
            var failed: String?
            for probe in probes where await !probe.check() {
                failed = probe.name
                break
            }
            if Task.isCancelled { return }
            if failed == nil { ping() }
            if failed != failing { onHealthChange(failed) }
            failing = failed
            do { try await clock.loopSleep(for: interval) } catch { return }
        }
    }
}
