import ArgumentParser
import Hummingbird
import ReplenishCloud

/// `replenish-cloud serve`: one copy of the service. Every setting has an environment variable, as Lambda
/// passes them; the skill's client secret has only its variable, so it is never in a process's arguments.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serve the units, the claims and the skill's directives.")

    @OptionGroup var options: DatabaseOptions

    @Option(help: "Address to listen on (default: $REPLENISH_CLOUD_HOST or 127.0.0.1).")
    var host: String?

    @Option(help: "Port (default: $AWS_LWA_PORT, $PORT or 8080).")
    var port: Int?

    @Option(help: "Alexa's event gateway (default: $REPLENISH_CLOUD_GATEWAY or North America's).")
    var gateway: String?

    @Option(help: "LWA's token URL (default: $REPLENISH_CLOUD_LWA_TOKEN_URL or Amazon's).")
    var lwaTokenURL: String?

    @Option(help: "LWA's profile URL (default: $REPLENISH_CLOUD_LWA_PROFILE_URL or Amazon's).")
    var lwaProfileURL: String?

    @Option(help: "How a unit's certificate reaches the service: header or lambda-request-context.")
    var unitIdentity: String?

    @Option(help: "Seconds between the copy's own passes over queued events and the daily update (0: the schedule's).")
    var sendInterval: Int?

    func run() async throws {
        guard let clientId = environment("REPLENISH_CLOUD_CLIENT_ID"),
            let clientSecret = environment("REPLENISH_CLOUD_CLIENT_SECRET")
        else {
            throw ValidationError(
                "set REPLENISH_CLOUD_CLIENT_ID and REPLENISH_CLOUD_CLIENT_SECRET (the skill's Alexa Skill Messaging client)"
            )
        }
        var settings = CloudSettings(
            database: try CloudSettings.database(url: try options.databaseURL()),
            catalogue: try options.loadCatalogue(),
            clientId: clientId, clientSecret: clientSecret)
        settings.host = host ?? environment("REPLENISH_CLOUD_HOST") ?? settings.host
        settings.port = port ?? (environment("AWS_LWA_PORT") ?? environment("PORT")).flatMap(Int.init) ?? settings.port
        settings.gatewayURL = gateway ?? environment("REPLENISH_CLOUD_GATEWAY") ?? settings.gatewayURL
        settings.lwaTokenURL = lwaTokenURL ?? environment("REPLENISH_CLOUD_LWA_TOKEN_URL") ?? settings.lwaTokenURL
        settings.lwaProfileURL =
            lwaProfileURL ?? environment("REPLENISH_CLOUD_LWA_PROFILE_URL") ?? settings.lwaProfileURL
        settings.eventsPath = environment("AWS_LWA_PASS_THROUGH_PATH") ?? settings.eventsPath
        let identityName = unitIdentity ?? environment("REPLENISH_CLOUD_UNIT_IDENTITY") ?? "header"
        guard let identity = UnitIdentity(rawValue: identityName) else {
            throw ValidationError("--unit-identity must be header or lambda-request-context")
        }
        settings.identity = identity
        settings.sendInterval = sendInterval ?? environment("REPLENISH_CLOUD_SEND_INTERVAL").flatMap(Int.init) ?? 0
        try await CloudService.application(settings: settings, logger: makeLogger()).runService()
    }
}
