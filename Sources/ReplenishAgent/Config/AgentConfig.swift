/// The agent's configuration, decoded strictly from `agent.json` (docs/configuration.md and
/// `config/agent.example.json`). Every field is already validated; the loader is `AgentConfig.load`.
struct AgentConfig: Sendable {
    /// The DRS phase decides the two flags the device reports to the companion app and LWA.
    enum Phase: String, Sendable {
        case test, certification, production

        var isTestDevice: Bool { self == .test }
        var shouldIncludeNonLive: Bool { self != .production }
    }

    struct Device: Sendable {
        var serial: String
        var model: String
        var phase: Phase
        /// Where the serial came from (`device.serial`, `device.serialFile` or the device tree).
        var serialSource: SerialSource = .config
    }

    struct LWA: Sendable {
        var clientId: String
        var clientSecret: Secret?
        var tokenURL: EndpointURL
        /// Where code-based linking asks for a code pair (`lwa.codePairURL`; required in code mode).
        var codePairURL: EndpointURL? = nil
    }

    /// How the customer links the device to an account (`pairing.mode`).
    enum PairingMode: String, Sendable, Equatable {
        /// The companion app talks to the device's pairing endpoints (docs/companion-app.md).
        case companion
        /// The device gets a code pair from LWA and shows the code; no pairing port (docs/protocol.md).
        case code
    }

    /// Which of Amazon's programs the device speaks (`program`, docs/programs.md).
    enum Program: String, Sendable, Equatable {
        /// Dash Replenishment's device API: the device holds the customer's LWA token and orders (the default).
        case drs
        /// Alexa's inventory sensors: the device reports its supplies to the maker's cloud, which reports them to
        /// Alexa; the device holds no Amazon token.
        case alexa
    }

    /// What the drs program needs of Amazon: LWA and the DRS base URL (`lwa`, `drs`).
    struct DRSSettings: Sendable {
        var lwa: LWA
        var baseURL: EndpointURL
    }

    struct Button: Sendable {
        var input: String
        var slot: String
        /// After an accepted order, further presses of this button within this time only flash the LED.
        var cooldownSeconds: Int = 60
        /// What a refill of the slot holds, in the unit agreed for the device (`quantity`); nil when not
        /// configured (slot status then counts in refills).
        var quantity: Double? = nil
        /// What is left when this button is pressed or this sensor reads low (`remainingWhenLow`, default 0).
        var remainingWhenLow: Double = 0
        /// The alexa program: what this input tells of its slot's supply (`usage` or `level`).
        var sensor: SupplySensor? = nil
    }

    /// `wifiSetup`: the interfaces NetworkManager uses, how long the access point stays open, and the setup
    /// endpoints' port while it is open.
    struct WiFiSetupConfig: Sendable {
        /// The Wi-Fi interface that joins networks (empty: NetworkManager's first Wi-Fi device).
        var interface = ""
        /// The interface that runs the access point (empty: the same; `ap0` made by the package's
        /// `replenish-agent-ap0.service` keeps the access point up while the unit joins).
        var accessPointInterface = ""
        var openMinutes = 15
        var port = 8644
    }

    struct Listen: Sendable, Equatable {
        var host: String
        var port: Int
    }

    var device: Device
    var program: Program = .drs
    /// LWA and DRS (`lwa`, `drs`): the drs program's, nil in the alexa program.
    var drs: DRSSettings?
    /// The maker's cloud and the unit's certificate (`alexa`): the alexa program's, nil in the drs program.
    var alexa: AlexaSettings? = nil
    var caFile: String?
    var stateDirectory: String
    var boardPath: String
    var board: BoardFile
    var buttons: [Button]
    var pairingMode: PairingMode = .companion
    /// Where the pairing endpoints listen: required in companion mode, unused in code mode.
    var pairingListen: Listen?
    /// How long the pairing window stays open (`pairing.windowMinutes`, 1 to 1440, default 10).
    var pairingWindowMinutes: Int = 10
    /// The device's setup key (`pairing.setupKeyFile`): with it the pairing endpoints give and ask for proofs.
    /// Required in the production phase in companion mode.
    var pairingSetupKey: SetupKey? = nil
    /// Wi-Fi setup mode (`wifiSetup`, docs/wifi-setup.md): nil when it is off (the default).
    var wifiSetup: WiFiSetupConfig? = nil
    /// A folder emptied at every boot (`runtimeDirectory`, default `/run/replenish-agent`: the unit's
    /// `RuntimeDirectory=`), where the agent marks which boot it runs in (`BootIdentity`).
    var runtimeDirectory: String = AgentConfig.defaultRuntimeDirectory
    /// Where the config came from (for messages).
    var path: String

    static let defaultRuntimeDirectory = "/run/replenish-agent"

    /// The slot a named input orders for, if it is mapped.
    func slot(forInput input: String) -> String? { buttons.first { $0.input == input }?.slot }

    /// The button (or sensor) mapping of a named input.
    func button(forInput input: String) -> Button? { buttons.first { $0.input == input } }

    /// The drs program's LWA and DRS settings; in the alexa program, the error of a command that only the drs
    /// program has (`what` names it).
    func drsSettings(for what: String) throws(AgentError) -> DRSSettings {
        guard let drs else {
            throw AgentError(
                .configuration,
                "\(what) belongs to program \"drs\"; \(path) sets program \"alexa\" (docs/programs.md)")
        }
        return drs
    }

    func cooldown(forInput input: String) -> Duration {
        .seconds(buttons.first { $0.input == input }?.cooldownSeconds ?? 0)
    }

    /// The slots the device orders for, in config order, without repeats.
    var slots: [String] {
        var seen: Set<String> = []
        return buttons.map(\.slot).filter { seen.insert($0).inserted }
    }
}
