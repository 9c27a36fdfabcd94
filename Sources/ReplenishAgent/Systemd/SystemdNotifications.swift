import Logging
import NIOCore

/// The daemon's side of systemd: `READY=1` when the service group is up, `STATUS=` lines as the pairing,
/// token and outbox change, watchdog pings while the agent's loops are healthy, `STOPPING=1` at shutdown.
/// Nothing at all when the agent was not started by systemd (`$NOTIFY_SOCKET` unset).
enum SystemdNotifications {
    /// The GPIO thread's heartbeat for `watchdogInterval`: two beats per ping interval, so every interval
    /// sees one; nil (no idle wakeups) without a watchdog.
    static func gpioHeartbeat(_ notifier: SystemdNotifier) -> Duration? {
        notifier.watchdogInterval.map { $0 / 2 }
    }

    /// The service to run last in the group (so graceful shutdown stops it first and `STOPPING=1` goes out
    /// as the shutdown begins), or nil without systemd. Its start is "ready": the state files are loaded,
    /// the GPIO lines are held (the backend exists) and every other service has been started. `gpioBeats`: the
    /// GPIO thread's heartbeat count (libgpiod's backend; nil for the simulated board). `afterReady`: what waits
    /// for `READY=1` to be out (the pairing's start: `StartUp.startPairing`).
    static func make<C: Clock>(
        notifier: SystemdNotifier, tokens: TokenManager<C>, orders: DeliveryLoop<C>,
        gpioBeats: (@Sendable () -> UInt64)?,
        group: any EventLoopGroup, pairingMode: AgentConfig.PairingMode = .companion, logger: Logger,
        afterReady: @escaping @Sendable () async -> Void = {}
    ) async -> Part<C>? where C.Duration == Duration {
        guard notifier.isEnabled else { return nil }
        let outbox = await orders.book.snapshot
        let status = SystemdStatusKeeper<C>(
            notifier: notifier, token: await tokens.state, pending: outbox.pending.count,
            parked: outbox.parked.count,
            waitingFor: pairingMode == .code
                ? "the code to be entered (replenish-agent status shows it)" : "the companion app")
        // Subscribed now, before any service starts, so the line misses no change.
        let tokenEvents = tokens.events.subscribe()
        let orderUpdates = orders.book.updates.subscribe()
        var probes = [
            // A job on NIO's event loop (pairing endpoints, control socket) runs.
            HealthProbe(name: "event loop") { (try? await group.next().submit {}.get()) != nil },
            // The actors that own the token and the outbox answer.
            HealthProbe(name: "token manager") {
                _ = await tokens.isPaired
                return true
            },
            HealthProbe(name: "order service") {
                _ = await orders.book.snapshot
                return await orders.answers()
            },
        ]
        if let gpioBeats, notifier.watchdogInterval != nil {
            let heartbeat = HeartbeatProbe(beats: gpioBeats)
            probes.append(HealthProbe(name: "GPIO thread") { heartbeat.check() })
        }
        return Part(
            notifier: notifier, status: status, tokens: tokenEvents, orders: orderUpdates, probes: probes,
            logger: logger, afterReady: afterReady)
    }

    /// systemd's side as the daemon runs it: the STATUS= line follows the token events and the outbox while
    /// the notifications run (READY=1, watchdog pings, STOPPING=1).
    struct Part<C: Clock>: DaemonPart where C.Duration == Duration {
        let notifier: SystemdNotifier
        let status: SystemdStatusKeeper<C>
        let tokens: AsyncStream<TokenEvent>
        let orders: AsyncStream<OrderUpdate>
        let probes: [HealthProbe]
        let logger: Logger
        var afterReady: @Sendable () async -> Void = {}
        var description: String { "systemd" }

        func follow() async { await status.follow(tokens: tokens, orders: orders) }
        func work() async {
            await SystemdNotifications.runNotifications(
                notifier: notifier, status: status, probes: probes, logger: logger, afterReady: afterReady)
        }
    }

    /// READY=1, then `afterReady`, then watchdog pings while every probe answers, then STOPPING=1 when cancelled.
    static func runNotifications(
        notifier: SystemdNotifier, status: some StatusLineKeeper, probes healthProbes: [HealthProbe], logger: Logger,
        afterReady: @Sendable () async -> Void = {}
    ) async {
        if let failure = await status.ready() { logger.warning("systemd: \(failure)") }
        await afterReady()
        if let interval = notifier.watchdogInterval {
            logger.info("systemd watchdog on", metadata: ["watchdog.ping": "\(interval)"])
            let pinger = WatchdogPinger(
                interval: interval, clock: ContinuousClock(), probes: healthProbes,
                ping: {
                    if let failure = notifier.watchdog() { logger.warning("systemd watchdog: \(failure)") }
                },
                onHealthChange: { failing in
                    if let failing {
                        logger.error("systemd watchdog: \(failing) is not answering; no more pings")
                    } else {
                        logger.notice("systemd watchdog: healthy again; pinging")
                    }
                })
            await pinger.run()
        } else {
            // No watchdog: nothing to time; wait for the stop (no timer, no wakeup).
            await Waker().wait(timeout: nil, clock: ContinuousClock())
        }
        _ = await status.stopping()
    }
}

extension SystemdStatusKeeper {
    /// Keeps the STATUS= line up to date with the token state and the outbox.
    nonisolated func follow(tokens: AsyncStream<TokenEvent>, orders: AsyncStream<OrderUpdate>) async {
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await case .changed(let state) in tokens { await self.update(token: state) }
            }
            group.addTask {
                for await update in orders {
                    await self.update(pending: update.pending, parked: update.parked)
                }
            }
        }
    }
}
