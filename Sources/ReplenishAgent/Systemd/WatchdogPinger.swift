/// Sends `WATCHDOG=1` every `interval` (half of `WatchdogSec=`) while every probe passes, and none while one
/// fails, so systemd restarts an agent whose loops stopped. It runs as a task on the agent's executor: an
/// executor that cannot run it stops the pings by itself.
final actor WatchdogPinger<C: Clock> where C.Duration == Duration {
    let interval: Duration
    let clock: C
    let probes: [HealthProbe]
    /// Sends one ping.
    let ping: @Sendable () -> Void
    /// Called when a probe fails (once per failing streak, with the probe's name) or passes again (nil).
    let onHealthChange: @Sendable (String?) -> Void
    /// When a round is due, whether it pings, what changed.
    private var rounds: WatchdogRounds<C.Instant>

    init(
        interval: Duration, clock: C, probes: [HealthProbe], ping: @escaping @Sendable () -> Void,
        onHealthChange: @escaping @Sendable (String?) -> Void
    ) {
        self.interval = interval
        self.clock = clock
        self.probes = probes
        self.ping = ping
        self.onHealthChange = onHealthChange
        rounds = WatchdogRounds(interval: interval)
    }

    /// Until cancelled: a round, then a sleep until the next.
    func run() async {
        while !Task.isCancelled {
            guard let until = await step().until else { return }
            do { try await clock.loopSleep(until: until) } catch { return }
        }
    }

    /// A round when one is due (probe, ping if healthy, report a change of health); returns when the next is.
    func step() async -> LoopStep<C.Instant> {
        if let due = rounds.due(at: clock.now) { return .wait(until: due, worked: false) }
        var failed: String?
        for probe in probes where await !probe.check() {
            failed = probe.name
            break
        }
        if Task.isCancelled { return .wait(until: nil, worked: false) }
        let outcome = rounds.roundDone(failed: failed, at: clock.now)
        if outcome.ping { ping() }
        if let change = outcome.healthChange { onHealthChange(change) }
        return .wait(until: outcome.nextRound, worked: true)
    }
}
