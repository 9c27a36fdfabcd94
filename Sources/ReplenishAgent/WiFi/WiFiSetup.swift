import Logging
import NIOCore

/// The Wi-Fi setup mode as the daemon runs it (docs/wifi-setup.md). It stays dormant, with nothing of
/// NetworkManager or libdbus-1 loaded, while the kernel has a default route: a unit on its network never pays for
/// it. It wakes when the agent starts with no default route, or on a long press without one; then it connects to
/// NetworkManager (`DBusNetworkManager`), runs `NetworkSetupKeeper`, and serves the setup endpoints
/// (`ProvisioningEndpoints`) on `wifiSetup.port` of every address while the access point is open. The LED and
/// `status` follow the phase.
final actor WiFiSetup<C: Clock> where C.Duration == Duration {
    private let settings: AgentConfig.WiFiSetupConfig
    private let accessPoint: SetupAccessPoint
    private let key: SetupKey
    private let clock: C
    private let group: any EventLoopGroup
    private let logger: Logger
    /// Told each change of what the LED and `status` show (nil: dormant).
    private let show: @Sendable (WiFiSetupShown?) async -> Void
    /// Told when the unit joined the network the phone sent: the pairing goes on there (an unpaired unit opens
    /// its pairing window again, so that a setup slower than the window still pairs).
    private let joined: @Sendable () async -> Void
    private let makeControl: @Sendable () -> any NetworkManagerControl
    private let hasNetwork: @Sendable () -> Bool
    private var keeper: NetworkSetupKeeper<C>?
    private let (wakes, wake) = AsyncStream.makeStream(of: Bool.self, bufferingPolicy: .bufferingNewest(1))

    init(
        settings: AgentConfig.WiFiSetupConfig, serial: String, key: SetupKey, clock: C, group: any EventLoopGroup,
        logger: Logger, show: @escaping @Sendable (WiFiSetupShown?) async -> Void,
        joined: @escaping @Sendable () async -> Void = {},
        makeControl: (@Sendable () -> any NetworkManagerControl)? = nil,
        hasNetwork: @escaping @Sendable () -> Bool = { NetworkInterfaces.hasDefaultRoute() }
    ) {
        self.settings = settings
        self.accessPoint = SetupAccessPoint(serial: serial, key: key)
        self.key = key
        self.clock = clock
        self.group = group
        self.logger = logger
        self.show = show
        self.joined = joined
        self.makeControl =
            makeControl ?? {
                DBusNetworkManager(interface: settings.interface, accessPointInterface: settings.accessPointInterface)
            }
        self.hasNetwork = hasNetwork
    }

    /// A long press: the answer when setup mode took it (no network), nil when it keeps its other meaning.
    func longPress() async -> String? {
        if let keeper {
            guard await keeper.longPress() else { return nil }
            return await keeper.isOpen
                ? "setup mode: access point \(accessPoint.ssid) open" : "setup mode: access point closed"
        }
        guard !hasNetwork() else { return nil }
        wake.yield(true)
        return "setup mode: opening access point \(accessPoint.ssid)"
    }

    /// Until cancelled: dormant while there is a default route, then the setup mode.
    func run() async {
        var longPress = false
        if hasNetwork() {
            logger.debug("setup mode: dormant (the unit has a default route)")
            // What an earlier run of the agent showed (the runtime directory outlives a restart) is not this one's.
            await show(nil)
            var woken: Bool?
            for await pressed in wakes {
                woken = pressed
                break
            }
            guard let woken else { return }
            longPress = woken
        }
        let (phases, phase) = AsyncStream.makeStream(of: NetworkSetup<C.Instant>.Phase.self)
        let sharesRadio = settings.accessPointInterface.isEmpty || settings.accessPointInterface == settings.interface
        let keeper = NetworkSetupKeeper(
            control: makeControl(), accessPoint: accessPoint,
            timing: .init(openFor: .seconds(60 * settings.openMinutes)), clock: clock, logger: logger,
            reopenAfterFailedJoin: sharesRadio, observe: { phase.yield($0) })
        self.keeper = keeper
        let endpoints = ProvisioningEndpoints(key: key, setup: keeper, clock: clock, logger: logger)
        await withDiscardingTaskGroup { tasks in
            tasks.addTask { await self.serveWhileOpen(endpoints) }
            tasks.addTask {
                for await next in phases { await self.changed(next) }
            }
            await keeper.run(longPress: longPress)
            tasks.cancelAll()
        }
    }

    private let (openings, opened) = AsyncStream.makeStream(of: Bool.self, bufferingPolicy: .bufferingNewest(1))

    private func changed(_ phase: NetworkSetup<C.Instant>.Phase) async {
        let shown: WiFiSetupShown
        switch phase {
        case .online: shown = .onNetwork
        case .offline: shown = .waiting
        case .setup(_, let join):
            shown = .open(accessPoint: accessPoint.ssid, join: join?.name)
            if case .joined = join { await joined() }
        case .unavailable(let reason): shown = .unavailable(reason)
        }
        if case .setup = phase { opened.yield(true) } else { opened.yield(false) }
        await show(shown)
    }

    /// The setup endpoints' server while the access point is open, closed when it closes.
    private func serveWhileOpen(_ endpoints: ProvisioningEndpoints<C>) async {
        let (port, group, logger) = (settings.port, group, logger)
        var server: Task<Void, Never>?
        for await open in openings {
            if open, server == nil {
                server = Task {
                    do {
                        try await LocalHTTPServer.serve(
                            at: .tcp(host: "0.0.0.0", port: port), group: group,
                            onBound: { bound in
                                logger.info(
                                    "setup mode: serving the phone", metadata: ["wifi.port": "\(bound ?? port)"])
                            },
                            handler: { request in
                                await endpoints.handle(request) ?? .error(404, "NOT_FOUND", "no such endpoint")
                            })
                    } catch is CancellationError {
                    } catch {
                        logger.error("setup mode: cannot serve the phone", metadata: ["error": "\(error)"])
                    }
                }
            } else if !open, let running = server {
                running.cancel()
                await running.value
                server = nil
            }
        }
        server?.cancel()
    }
}

/// What `status` and the LED show of the setup mode.
enum WiFiSetupShown: Sendable, Equatable, CustomStringConvertible {
    case onNetwork
    case waiting
    case open(accessPoint: String, join: String?)
    case unavailable(String)

    var description: String {
        switch self {
        case .onNetwork: "on the network"
        case .waiting: "no network; the access point opens after the wait (a long press opens it now)"
        case .open(let ssid, let join): "access point \(ssid) open" + (join.map { "; join: \($0)" } ?? "")
        case .unavailable(let reason): "unavailable: \(reason)"
        }
    }

    var isOpen: Bool { if case .open = self { true } else { false } }
}

extension WiFiSetup {
    /// The setup mode as the daemon runs it.
    struct Part: DaemonPart {
        let setup: WiFiSetup
        var description: String { "wifi-setup" }
        func work() async { await setup.run() }
    }
}
