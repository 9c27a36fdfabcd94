/// The setup access point a unit opens when it has no network (docs/wifi-setup.md): its name, its WPA2
/// passphrase and the proofs of the provisioning requests, all from the label (the serial and the setup key), so
/// that only the label's holder can join it or hand the unit a network.
///
/// - The name is `Replenish-` and the first 4 hex digits of the DNS-SD id (`PairingAdvertisement.id`): short
///   enough for any phone's list, and the phone that read the label knows which one is its unit.
/// - The passphrase is the first 32 hex digits of HMAC-SHA256(key, `replenish-wifi-v1 passphrase\n<id>`):
///   128 bits, so the access point is as hard to join as the key is to guess, and a unit never uses another
///   unit's passphrase (the id is in the MAC).
/// - A provisioning request carries a proof over every field the device acts on, and the device's answer a proof
///   over every field the phone acts on, keyed by the setup key like `deviceInfo`/`companionInfo`.
struct SetupAccessPoint: Sendable {
    /// The access point's SSID.
    let ssid: String
    /// The WPA2 passphrase (prints as `<redacted>`).
    let passphrase: Secret

    init(serial: String, key: SetupKey) {
        let id = PairingAdvertisement.id(serial: serial)
        ssid = "Replenish-\(id.prefix(4))"
        passphrase = Secret(String(key.proof(of: "replenish-wifi-v1 passphrase\n\(id)").prefix(32)))
    }

    /// The phone's proof of `GET /provision/networks?nonce=N&proof=P`: the nonce is the phone's.
    static func networksRequestMessage(nonce: String) -> String { "replenish-wifi-v1 networks request\n\(nonce)" }

    /// The device's proof of its answer to `GET /provision/networks`: the phone's nonce, the new provisioning
    /// session, and each network it lists (SSID in hex, signal, security), one per line, in the answer's order.
    static func networksAnswerMessage(nonce: String, sessionId: String, networks: [VisibleNetwork]) -> String {
        (["replenish-wifi-v1 networks", nonce, sessionId]
            + networks.map { "\(hex($0.ssid)) \($0.signal) \($0.security.rawValue)" }).joined(separator: "\n")
    }

    /// The phone's proof of `POST /provision/network`: the session the device gave, and every field the device
    /// acts on. The passphrase is in the MAC, so a relay cannot change it; it is never in a log.
    static func networkRequestMessage(sessionId: String, ssid: String, passphrase: String?, hidden: Bool) -> String {
        "replenish-wifi-v1 network\n\(sessionId)\n\(hex(ssid))\n\(passphrase ?? "")\n\(passphrase == nil ? "open" : "wpa")\n\(hidden)"
    }

    /// The phone's proof of `GET /provision/network?sessionId=S&nonce=N&proof=P`, and the device's of its answer
    /// (the state the phone shows the customer).
    static func stateRequestMessage(sessionId: String, nonce: String) -> String {
        "replenish-wifi-v1 state request\n\(sessionId)\n\(nonce)"
    }
    static func stateAnswerMessage(sessionId: String, nonce: String, state: String, ssid: String) -> String {
        "replenish-wifi-v1 state\n\(sessionId)\n\(nonce)\n\(state)\n\(hex(ssid))"
    }

    /// An SSID in a proof's text: its UTF-8 as lowercase hex, so that no SSID (any bytes, a newline included) can
    /// make two different requests or answers read as one text.
    static func hex(_ ssid: String) -> String { SetupKey.hex(Array(ssid.utf8)) }
}

/// A network NetworkManager sees, as `GET /provision/networks` lists it.
struct VisibleNetwork: Sendable, Equatable {
    enum Security: String, Sendable { case open, wpa, unsupported }
    var ssid: String
    /// NetworkManager's strength, 0-100.
    var signal: Int
    var security: Security
    /// The channel (1-14 at 2.4 GHz, 32-177 at 5 GHz), 0 when unknown; not part of any proof.
    var channel = 0

    /// The channel of a frequency in MHz (0 when it is none of the 2.4 or 5 GHz band's).
    static func channel(frequency: UInt32) -> Int {
        switch frequency {
        case 2484: 14
        case 2412...2472: Int(frequency - 2407) / 5
        case 5160...5885: Int(frequency - 5000) / 5
        default: 0
        }
    }

    /// One network per SSID (the strongest of its access points), strongest first.
    static func strongestFirst(_ networks: [VisibleNetwork]) -> [VisibleNetwork] {
        var best: [String: VisibleNetwork] = [:]
        for network in networks where (best[network.ssid]?.signal ?? -1) < network.signal {
            best[network.ssid] = network
        }
        return best.values.sorted { ($0.signal, $1.ssid) > ($1.signal, $0.ssid) }
    }
}
