import ArgumentParser
import FoundationEssentials

/// `reset`: factory reset and owner change (`FactoryReset`). With the daemon running, the daemon does it
/// (asked over its control socket); otherwise the command does it on the files, under the state directory's
/// lock, and the deregistration waits in `deregistration.json` for the agent's next start.
struct ResetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset",
        abstract:
            "Factory reset: deregister from DRS (queued when offline), wipe tokens, queued presses and status, and open the pairing window."
    )

    @OptionGroup var options: ConfigOption

    func run() async throws {
        let config = try options.load()
        // The daemon first: it holds the state in memory, so only it may change it while it runs.
        if let answer = await DaemonClient.askAfterItsEnd("/reset", config: config) {
            return try DaemonClient.report("reset", answer)
        }
        do {
            // No daemon answered: take its lock so none starts meanwhile (and fail with the reason if one holds it).
            let lock = try StateDirectory.lock(config.stateDirectory, on: DiskLane.Context.beforeServing())
            defer { _ = lock }
            Output.line(
                try FactoryReset<ContinuousClock>.performOffline(
                    stateDirectory: config.stateDirectory, on: DiskLane.Context.beforeServing()))
        } catch {
            Output.error("reset: \(error.message)")
            throw ExitCode(1)
        }
    }
}
