import ArgumentParser

/// `replenish-agent`: the device agent. docs/commands.md has the commands' promises.
@main
struct AgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replenish-agent",
        abstract: "Dash Replenishment device agent: pairs with the customer's Amazon account and orders on a press.",
        // `--version`: the release, the package version and the commit of this build.
        version: "replenish-agent \(BuildInfo.description)",
        subcommands: [
            RunCommand.self, PressCommand.self, StatusCommand.self, CheckConfigCommand.self, LevelCommand.self,
            GPIOWatchCommand.self, ResetCommand.self, DeregisterCommand.self, CancelTestOrdersCommand.self,
            OrdersCommand.self, MakeSetupKeyCommand.self, LabelCommand.self,
        ])
}
