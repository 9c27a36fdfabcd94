/// What the device publishes by DNS-SD while its pairing window is open, so that the companion app finds it
/// without an address (docs/companion-app.md, "Finding the device"): a `_replenish._tcp` service on the pairing
/// port with the TXT strings `v=2` (this protocol's version), `id=` the first 16 hex digits of SHA-256 of the
/// serial (the app matches it to the label's serial without the serial going out on the network) and `md=` the
/// device model. The instance name is `Replenish <id>`; Avahi picks `… #2` when another host has it.
struct PairingAdvertisement: Sendable {
    static let serviceType = "_replenish._tcp"

    var name: String
    var port: Int
    var txt: [String]

    init(serial: String, model: String, port: Int) {
        let id = Self.id(serial: serial)
        name = "Replenish \(id)"
        self.port = port
        txt = ["v=2", "id=\(id)", "md=\(model)"]
    }

    /// The first 16 lowercase hex digits of SHA-256 of the serial's UTF-8.
    static func id(serial: String) -> String { String(SetupKey.hex(SHA256.hash(Array(serial.utf8))).prefix(16)) }
}

/// What `status` says about the advertisement while the window is open: advertised, or not and why.
enum AdvertisementStatus {
    static func advertised(port: Int) -> String { "advertised as \(PairingAdvertisement.serviceType) on port \(port)" }

    static func notAdvertised(_ reason: String) -> String {
        "not advertised: \(reason); the app must be given the device's address"
    }

    static let waitingForDaemon =
        "no avahi-daemon answers on the system bus; published as soon as one starts"
}
