/// What the setup mode asks of NetworkManager (docs/wifi-setup.md): the agent's side of its D-Bus API, so that
/// `NetworkSetupKeeper` is tested against a fake and runs against the real one. Every call may block on the
/// system bus, so none runs on the agent's event loop.
protocol NetworkManagerControl: Sendable {
    /// Connectivity now, and whether a Wi-Fi connection is saved; throws `NetworkManagerUnavailable` when there is
    /// no NetworkManager or no Wi-Fi device.
    func start() async throws -> (online: Bool, savedWiFi: Bool)
    /// NetworkManager's changes from `start` on (connectivity, saved connections, a join's end, going away).
    func changes() -> AsyncStream<NetworkManagerChange>
    /// Opens the WPA2 access point (NetworkManager's own, with its DHCP for the phone) on `channel` (0:
    /// NetworkManager's choice); opened again on another channel, it moves there.
    func openAccessPoint(ssid: String, passphrase: String, channel: Int) async throws
    func closeAccessPoint() async
    /// The networks NetworkManager sees now, strongest first.
    func networks() async throws -> [VisibleNetwork]
    /// Starts joining a network; its end comes as `.joinSucceeded` or `.joinFailed`. The credentials go into
    /// NetworkManager's own connection file and nowhere else.
    func join(ssid: String, passphrase: String?, hidden: Bool) async throws
    func cancelJoin() async
    /// Asks NetworkManager to join a saved Wi-Fi network again: true when it was asked, false when there was
    /// nothing to do (the radio is joining or connected already, or no saved network is in range).
    func reconnectSaved() async throws -> Bool
}

enum NetworkManagerChange: Sendable, Equatable {
    case connectivity(online: Bool)
    case savedWiFi(Bool)
    case joinSucceeded
    case joinFailed(NetworkSetupJoinFailure)
    case gone(reason: String)
}

/// Why setup mode is not available: said by `status` and `check-config`.
struct NetworkManagerUnavailable: Error, CustomStringConvertible {
    var reason: String
    var description: String { reason }
}
