import ArgumentParser
import FoundationEssentials

/// `deregister`: the device leaves the customer's account. DRS is told (`DELETE /registration`) at once, or the
/// call is queued in `deregistration.json` and retried until DRS answers; the tokens and queued presses are
/// wiped at once and pairing opens again. The order history stays (`reset` wipes it too). With the daemon
/// running the daemon does it (over its control socket); otherwise the command does, under the state
/// directory's lock, also when the daemon ended before it answered (`DaemonClient.askAfterItsEnd`).
struct DeregisterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deregister",
        abstract:
            "Leave the customer's account: deregister from DRS (queued and retried when offline), wipe the tokens and queued presses, and open pairing again."
    )

    @OptionGroup var options: ConfigOption

    func run() async throws {
        let config = try options.load()
        if let answer = await DaemonClient.askAfterItsEnd("/deregister", config: config) {
            return try DaemonClient.report("deregister", answer)
        }
        do {
            let lock = try StateDirectory.lock(config.stateDirectory, on: DiskLane.Context.beforeServing())
            defer { _ = lock }
            Output.line(try await Self.performOffline(config: config))
        } catch {
            Output.error("deregister: \(error.message)")
            throw ExitCode(1)
        }
    }

    /// No daemon runs (the caller holds the lock). The local part first, resumable as the daemon's is
    /// (`ResetWipe`): the call is queued durably in `deregistration.json` (the newest refresh token), the pairing
    /// and queued presses go; then DRS is asked once now, also for a call the daemon queued there before it ended
    /// (killed during its own `deregister`). If it cannot be reached, the call waits in the file for the agent's
    /// next start.
    static func performOffline(config: AgentConfig) async throws(AgentError) -> String {
        let directory = config.stateDirectory
        let logger = DaemonClient.commandLogger("deregister")
        try POSIX.checkWritable(directory)
        // A reset or deregistration cut short earlier is finished first (`ResetWipe`).
        let lane = DiskLane.Context.beforeServing()
        try ResetWipe.finishInterrupted(stateDirectory: directory, on: lane) { logger.notice("\($0)") }
        try FactoryReset<ContinuousClock>.shredMovedAside(stateDirectory: directory)
        try ResetWipe.begin(.pairing, stateDirectory: directory, on: lane)
        let old = try ResetWipe.wipeFiles(.pairing, stateDirectory: directory, on: lane) { logger.error("\($0)") }
        try ResetWipe.end(stateDirectory: directory, on: lane)
        var deregistered = "the device was not paired"
        let store = StateStore<PendingDeregistration>.deregistration(stateDirectory: directory)
        // The wipe queued the pairing's call here; a daemon that ended during its own deregistration queued it too.
        if case .read(var pending) = try store.read(on: lane, owner: StateDirectory.agentUID(directory)) {
            do throws(AgentError) {
                let (lwa, drs) = try Agent.lanes(config: config, for: "deregister")
                let stillGood = old.map { $0.accessTokenExpiresAt > POSIX.wallTime() + 60 } ?? false
                try await DeregistrationQueue<ContinuousClock>.attempt(
                    &pending, accessToken: stillGood ? old?.accessToken : nil, lwa: lwa, drs: drs, logger: logger
                ) { (newest) throws(AgentError) in try store.saveNow(newest, on: lane) }
                try store.shredNow(on: lane)
                deregistered = "deregistered from DRS"
            } catch {
                deregistered = "deregistration queued (\(error.message)); the agent retries it when it runs"
            }
        }
        return "deregister: \(deregistered); tokens and queued presses wiped; the agent opens pairing when it runs"
    }
}
