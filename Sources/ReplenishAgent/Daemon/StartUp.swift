import Logging
import NIOPosix
import ServiceLifecycle
import Synchronization

/// The daemon's start-up: what runs once, before the service group (swift-service-lifecycle's preamble shape),
/// and decides. `Agent.run` builds the parts around it; the order of the parts fixes its two moments:
/// - `checkIdentity()`, before any part follows a stream (so a reset here reaches no follower): the pairing
///   checked against this device's identity, forgotten or held; what it returns (the serial watch, when the
///   serial is in doubt) is added to the group;
/// - `begin(lights:)`, once every follower is subscribed and just before the group runs: the LED's start, the
///   "starting" line, and from then on a durable write on the event loop stops a debug build (`OffLoop`);
/// - `startPairing()`, right after `READY=1` (the systemd part calls it), or with `begin` without systemd.
struct StartUp<C: Clock>: Sendable where C.Duration == Duration {
    let config: AgentConfig
    let tokens: TokenManager<C>
    let orders: DeliveryLoop<C>
    let reset: FactoryReset<C>
    let pairing: PairingByMode<C>
    let shown: ShownStatusBook
    let clock: C
    let logger: Logger
    /// The daemon's disk lane: the serial watch re-reads the serial there.
    let disk: DiskLane

    /// A pairing from a build before the identity record is this device's: recorded now, at the first start of
    /// this build, so that an image cloned from this unit later is caught by the check that follows.
    ///
    /// A pairing made for another serial, model or phase (a serial file changed, a unit moved from the test
    /// phase to production, an image cloned from a bench unit) must not order on: its deregistration is queued
    /// and the device is pairable again, with the reason in the log and `status`. A serial read from a file
    /// that alone differs may be a glitch of this start: the pairing is held (nothing ordered, nothing
    /// refreshed) while `SerialWatch` re-reads it, and forgotten only if it keeps reading the new value.
    /// Returns the parts to add to the group: the serial watch, or none.
    func checkIdentity() async throws(AgentError) -> [any DaemonPart] {
        await recordMissingIdentity()
        guard let change = await tokens.identityChange else { return [] }
        let device = config.device
        guard let recorded = await tokens.pairedIdentity, device.serialSource != .config,
            DeviceIdentity(device).differsOnlyInSerial(from: recorded)
        else {
            try await forget(change)
            return []
        }
        var settling = SerialSettling<C.Instant>(recorded: recorded)
        if case .waiting(_, let reason) = settling.read(DeviceIdentity(device), at: clock.now) {
            logger.warning(
                "the serial differs from the pairing's: nothing is ordered while it is re-read",
                metadata: ["device.change": "\(change)"])
            await tokens.hold(reason: reason)
            await shown.recordTokenState(await tokens.state)
        }
        let watch = SerialWatch(
            read: {
                // On the disk lane: a slow EEPROM or a late mount must not hold the event loop.
                let read = try? await disk.run { _ throws(AgentError) in
                    AgentConfig.readSerial(again: device.serialSource, configured: device.serial)
                }
                return (read ?? .failure(.init(message: "the disk lane has stopped"))).map {
                    DeviceIdentity(serial: $0, model: device.model, phase: device.phase.rawValue)
                }
            }, recorded: recorded, tokens: tokens, clock: clock, forget: { [self] in try? await forget($0) },
            logger: logger)
        return [watch]
    }

    /// The start, once every follower is subscribed: the LED shows the state files as loaded, and the "starting"
    /// line says what runs. `startsPairing`: the pairing starts here too (no systemd part to start it after
    /// `READY=1`).
    func begin(lights: Lights<C>, startsPairing: Bool) async {
        let paired = await tokens.isPaired
        await lights.start(paired: paired, outbox: await orders.book.snapshot)
        if startsPairing { await startPairing() }
        logger.info(
            "replenish-agent starting",
            metadata: [
                "device.serial": "\(config.device.serial)", "device.phase": "\(config.device.phase.rawValue)",
                "board": "\(config.board.name)", "paired": "\(paired)",
                "executor": "\(LoopExecutor.installed.description)",
            ])
        if let warning = LoopExecutor.installed.fallbackWarning { logger.warning("\(warning)") }
        // From here on, a durable write on the event loop stops a debug build (`OffLoop`).
        OffLoop.onLoop.withLock { $0 = { MultiThreadedEventLoopGroup.currentEventLoop != nil } }
        OffLoop.serving.store(true, ordering: .relaxed)
    }

    /// The pairing's start: a device that is not paired opens its window (the port bound, its DNS-SD
    /// advertisement started, libavahi-client loaded on its lane) or starts asking for a code. Under systemd it
    /// follows `READY=1`, which promises only that the state files are loaded and the GPIO lines held: an
    /// unpaired start says it as soon as a paired one, and its window's work does not compete with it.
    func startPairing() async { await pairing.start(paired: await tokens.isPaired) }

    /// This boot (`BootIdentity`, its mark made when missing); a runtime directory the agent cannot use is
    /// logged as an error, never a silent mode.
    static func thisBoot(runtimeDirectory: String, logger: Logger, on lane: borrowing DiskLane.Context) -> String? {
        let boot = BootIdentity.current(runtimeDirectory: runtimeDirectory, create: true, on: lane)
        if let problem = RuntimeDirectoryCheck.problem(runtimeDirectory) {
            logger.error(
                """
                the runtime directory cannot be used (\(problem)): a restart cannot tell this boot from another, \
                so a call whose answer a restart loses waits for a synchronised clock before it is resent \
                (this run's own calls are not held up)
                """,
                metadata: ["runtime.directory": "\(runtimeDirectory)"])
        }
        return boot
    }

    private func recordMissingIdentity() async {
        do throws(AgentError) {
            if let recorded = try await tokens.recordMissingIdentity() {
                logger.notice(
                    "the pairing had no identity recorded: this device's is recorded with it",
                    metadata: [
                        "device.serial": "\(recorded.serial)", "device.model": "\(recorded.model)",
                        "device.phase": "\(recorded.phase)",
                    ])
            }
        } catch {
            logger.error(
                "could not record the device's identity with the pairing (the next token write records it)",
                metadata: ["error": "\(error.message)"])
        }
    }

    /// Forgets the pairing of another identity (`change` says what changed): the same reset as the owner's, of
    /// the pairing only, its deregistration queued rather than sent now.
    private func forget(_ change: String) async throws(AgentError) {
        let reason = "the device's identity changed (\(change)); pair it again"
        logger.warning(
            "the pairing was made for another identity: deregistering it", metadata: ["reset.reason": "\(reason)"])
        let forgotten = await reset.perform(reason: reason, scope: .pairing, tellDRSNow: false)
        if case .failure(let error) = forgotten {
            logger.error("could not forget the pairing of the old identity", metadata: ["error": "\(error.message)"])
            throw error
        }
        await shown.recordTokenState(await tokens.state)
    }
}
