import ArgumentParser

/// `replenish-cloud`: the maker's cloud for units in program alexa (docs/cloud.md).
@main
struct ReplenishCloudCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replenish-cloud",
        abstract: "The maker's cloud for units in program alexa: reports, claims and the Alexa smart home skill.",
        subcommands: [Serve.self, Migrate.self, Register.self])
}
