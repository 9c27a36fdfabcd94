import ArgumentParser

/// `replenish-emulator`: a local stand-in for Login with Amazon and the Dash Replenishment Service, for
/// development and tests. It never ships on a device and shares no code with the agent.
@main
struct EmulatorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replenish-emulator",
        abstract: "Emulates Login with Amazon and the Dash Replenishment Service for tests.",
        subcommands: [ServeCommand.self, MakeCACommand.self, CompanionCommand.self]
    )

    static func main() {
        ProcessSignals.unblockAll()
        main(nil)
    }
}
