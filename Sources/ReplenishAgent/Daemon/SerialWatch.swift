import Logging

/// Re-reads a serial in doubt (`SerialSettling`) while the pairing is held (`TokenManager.hold`): until it reads
/// as the pairing's again (the pairing is released and orders what was pressed meanwhile) or the new serial has
/// read the same for the span (the pairing is forgotten, as at a start with another identity). Runs only when the
/// start found a serial from a file that differs from the pairing's in nothing but the serial. Its job done, it
/// ends, and the group runs on (`mayEnd`).
struct SerialWatch<C: Clock>: DaemonPart where C.Duration == Duration {
    /// The identity with the serial read again now, or the problem (unreadable, not a serial).
    let read: @Sendable () async -> Result<DeviceIdentity, AgentConfig.SerialProblem>
    let recorded: DeviceIdentity
    let tokens: TokenManager<C>
    let clock: C
    /// Forgets the pairing for `change` (`serial A → B`): the same as at a start with another identity.
    let forget: @Sendable (_ change: String) async -> Void
    let logger: Logger
    var description: String { "serial watch" }
    var mayEnd: Bool { true }

    func work() async throws {
        var settling = SerialSettling<C.Instant>(recorded: recorded)
        while await tokens.isPaired {
            let verdict: SerialSettling<C.Instant>.Verdict
            switch await read() {
            case .success(let identity): verdict = settling.read(identity, at: clock.now)
            case .failure(let problem): verdict = settling.read(nil, problem: problem.message, at: clock.now)
            }
            switch verdict {
            case .same(let identity):
                logger.notice(
                    "the serial reads as the pairing's again: ordering on the pairing",
                    metadata: ["device.serial": "\(identity.serial)"])
                await tokens.release(identity: identity)
                return
            case .waiting(_, let reason):
                await tokens.hold(reason: reason)
            case .changed(let change):
                logger.warning(
                    "the serial has read the same new value for the whole wait: the device's identity changed",
                    metadata: ["device.change": "\(change)"])
                await forget(change)
                return
            }
            try await clock.loopSleep(for: SerialSettling<C.Instant>.rereadEvery)
        }
    }
}
