import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import PostgresNIO
import ServiceLifecycle

/// Everything a copy of the service needs, from its configuration.
public struct CloudSettings: Sendable {
    public var database: PostgresClient.Configuration
    public var host = "127.0.0.1"
    public var port = 8080
    public var catalogue: Catalogue
    public var gatewayURL = "https://api.amazonalexa.com/v3/events"
    public var lwaTokenURL = "https://api.amazon.com/auth/o2/token"
    public var lwaProfileURL = "https://api.amazon.com/user/profile"
    public var clientId: String
    public var clientSecret: String
    public var identity: UnitIdentity = .header
    public var eventsPath = "/events"
    /// Seconds between the copy's own passes over the queued events and the daily update (a container without
    /// a schedule); 0 leaves both to the schedule's event (Lambda with EventBridge).
    public var sendInterval = 0

    public init(database: PostgresClient.Configuration, catalogue: Catalogue, clientId: String, clientSecret: String) {
        self.database = database
        self.catalogue = catalogue
        self.clientId = clientId
        self.clientSecret = clientSecret
    }

    /// A database URL (`postgres://user:password@host:port/database`) as postgres-nio's configuration; a `host`
    /// query item that is a path is a Unix socket's folder (`?host=/run/postgresql`).
    public static func database(url text: String) throws -> PostgresClient.Configuration {
        guard let url = URLComponents(string: text), url.scheme == "postgres" || url.scheme == "postgresql",
            let user = url.user, !user.isEmpty
        else {
            throw CloudError(.badConfig, "the database URL must be postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE")
        }
        let database = url.path.hasPrefix("/") && url.path.count > 1 ? String(url.path.dropFirst()) : user
        if let socketFolder = url.queryItems?.first(where: { $0.name == "host" })?.value, socketFolder.hasPrefix("/") {
            let port = url.port ?? 5432
            return .init(
                unixSocketPath: "\(socketFolder)/.s.PGSQL.\(port)", username: user, password: url.password,
                database: database)
        }
        // libpq's meanings: `disable` no TLS; `require` TLS without checking the server's certificate;
        // `verify-full` (the default) TLS with the certificate checked against the system's CAs, or against
        // `sslrootcert` (Amazon RDS's CA bundle, which the system's store does not hold).
        func item(_ name: String) -> String? { url.queryItems?.first { $0.name == name }?.value }
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let roots = item("sslrootcert") { configuration.trustRoots = .file(roots) }
        let tls: PostgresClient.Configuration.TLS
        switch item("sslmode") ?? "verify-full" {
        case "disable": tls = .disable
        case "require":
            configuration.certificateVerification = .none
            tls = .require(configuration)
        case "verify-full": tls = .require(configuration)
        case let other:
            throw CloudError(.badConfig, "sslmode=\(other): the database URL takes disable, require or verify-full")
        }
        return .init(
            host: url.host ?? "localhost", port: url.port ?? 5432, username: user, password: url.password,
            database: database, tls: tls)
    }
}

/// A copy of the service: the HTTP server, the database's client and, in a container, its own schedule.
public enum CloudService {
    public static func application(settings: CloudSettings, logger: Logger) -> some ApplicationProtocol {
        let client = PostgresClient(configuration: settings.database, backgroundLogger: logger)
        let store = CloudStore(client: client, catalogue: settings.catalogue, logger: logger)
        let http = HTTPClient.shared
        let lwa = HTTPLoginWithAmazon(
            http: http, tokenURL: settings.lwaTokenURL, profileURL: settings.lwaProfileURL, clientId: settings.clientId,
            clientSecret: settings.clientSecret)
        let gateway = HTTPEventGateway(http: http, url: settings.gatewayURL)
        let sender = EventSender(store: store, gateway: gateway, lwa: lwa, logger: logger)
        let routes = CloudRoutes(
            store: store, directives: DirectiveHandler(store: store, lwa: lwa, logger: logger), sender: sender,
            lwa: lwa,
            identity: settings.identity, eventsPath: settings.eventsPath, logger: logger)
        var services: [any Service] = [client]
        if settings.sendInterval > 0 {
            services.append(
                Schedule(store: store, sender: sender, interval: .seconds(settings.sendInterval), logger: logger))
        }
        var app = Application(
            router: routes.router(),
            configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: "replenish-cloud"),
            services: services, logger: logger)
        app.beforeServerStarts {
            let version = try await migrate(client: client, within: .seconds(30), logger: logger)
            logger.info("database ready", metadata: ["schema.version": "\(version)"])
        }
        return app
    }

    /// The schema steps at a copy's start, bounded: a database that does not answer (a wrong URL, a network
    /// that does not reach it) stops the start with that said, instead of a copy that never serves.
    public static func migrate(client: PostgresClient, within limit: Duration, logger: Logger) async throws -> Int {
        try await withThrowingTaskGroup(of: Int?.self) { group in
            group.addTask { try await Migrations.apply(client: client, logger: logger) }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            guard case .some(.some(let version)) = try await group.next() else {
                throw CloudError(
                    .upstream,
                    "the database did not answer within \(limit.components.seconds) s: check REPLENISH_CLOUD_DATABASE")
            }
            return version
        }
    }
}

/// A container's own schedule: the daily update (once a day across every copy) and the queued events.
struct Schedule: Service {
    let store: CloudStore
    let sender: EventSender
    let interval: Duration
    let logger: Logger

    func run() async throws {
        while !Task.isShuttingDownGracefully {
            do {
                _ = try await store.queueDailyUpdate(now: Date())
                _ = try await sender.sendDue(now: { Date() })
            } catch {
                logger.warning("scheduled pass failed: tried again later", metadata: ["error": "\(type(of: error))"])
            }
            try? await Task.sleep(for: interval)
        }
    }
}
