import ArgumentParser
import FoundationEssentials
import Logging

/// `cancel-test-orders [--slot ID]`: cancels the device's test orders at DRS (`TestOrderCancellation`), for
/// test runs (only the test phase places test orders; certification orders are real); refused in production. The daemon does it when it runs, else the command.
struct CancelTestOrdersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel-test-orders",
        abstract: "Test phase: cancel the device's test orders (all slots, or one); refused in production.")

    @OptionGroup var options: ConfigOption

    @Option(name: .long, help: "Cancel only this slot's test orders (a slot of the config's buttons).")
    var slot: String?

    func run() async throws {
        let config = try options.load()
        // Refused before anything is asked: nothing of a production device is touched.
        if let refusal = TestOrders.refusal(
            phase: config.device.phase, slot: slot, slots: config.slots)
        {
            Output.error("cancel-test-orders: \(refusal)")
            throw ExitCode(1)
        }
        struct Body: Encodable { var slot: String? }
        let body = Array(try JSONEncoder().encode(Body(slot: slot)))
        if let answer = await DaemonClient.askAfterItsEnd("/cancel-test-orders", body: body, config: config) {
            return try DaemonClient.report("cancel-test-orders", answer)
        }
        let result: Result<String, AgentError>
        do {
            let lock = try StateDirectory.lock(config.stateDirectory, on: DiskLane.Context.beforeServing())
            defer { _ = lock }
            result = await Self.performOffline(config: config, slot: slot)
        } catch {
            result = .failure(error)
        }
        switch result {
        case .success(let message): Output.line(message)
        case .failure(let error):
            Output.error("cancel-test-orders: \(error.message)")
            throw ExitCode(1)
        }
    }

    /// No daemon runs (the caller holds the lock): the command refreshes the access token itself when it must
    /// (saving a rotated refresh token as the daemon would) and asks DRS.
    static func performOffline(config: AgentConfig, slot: String?) async -> Result<String, AgentError> {
        let logger = DaemonClient.commandLogger("cancel-test-orders")
        do throws(AgentError) {
            let (lwa, drs) = try Agent.lanes(config: config, for: "cancel-test-orders")
            let wallTime: @Sendable () -> Double = { POSIX.wallTime() }
            let tokens = try TokenManager.open(
                stateDirectory: config.stateDirectory, lwa: lwa, clock: ContinuousClock(), wallTime: wallTime,
                clockTrusted: WallClock.isTrusted(), logger: logger, loadingOn: DiskLane.Context.beforeServing())
            return await TestOrderCancellation(
                phase: config.device.phase, slots: config.slots, tokens: tokens,
                drs: DRSSession(client: drs, tokens: tokens),
                record: recordOffline(stateDirectory: config.stateDirectory, logger: logger),
                wallTime: wallTime
            ).perform(slot: slot)
        } catch {
            return .failure(error)
        }
    }

    /// Without the daemon (the caller holds the state directory's lock): the outbox file is changed in place.
    static func recordOffline(stateDirectory: String, logger: Logger)
        -> @Sendable ([String], Double) async throws(AgentError) -> Void
    {
        { slots, at throws(AgentError) in
            let store = StateStore<Outbox>.outbox(stateDirectory: stateDirectory)
            let lane = DiskLane.Context.beforeServing()
            var outbox = try store.load(on: lane) { logger.error("\($0)") } ?? Outbox()
            outbox.recordTestOrdersCancelled(slots: slots, at: at)
            try store.saveNow(outbox, on: lane)
        }
    }
}
