/// The LED patterns a customer must be able to tell apart. Each is a repeating list of (on, duration) steps;
/// `off` and `solid` have no steps to repeat, so an idle device makes no wakeups for its LED.
enum LEDPattern: String, Sendable, CaseIterable {
    /// Paired and idle.
    case off
    /// Not paired and the pairing window open: waiting for the companion app. Slow blink.
    case pairingMode
    /// Not paired, code-based linking: a code is waiting to be entered at LWA's page (`status` shows it).
    /// Long on, short off.
    case codeWaiting
    /// A press is queued and being sent to DRS. Fast blink.
    case orderSent
    /// DRS accepted the order. Solid for a few seconds, then off.
    case orderPlaced
    /// Something needs the customer or the maker: a token fault, a parked order, or not paired with the
    /// pairing window closed (a long press opens it). Double blink.
    case needsAttention
    /// Orders are waiting because the network (or DRS) cannot be reached. Triple blink.
    case noNetwork
    /// A long press armed re-pairing; a second long press confirms. Very fast blink.
    case confirmRepairing
    /// A press that was acknowledged but did nothing (cooldown, cancel). One short flash.
    case acknowledge
    /// A press for a slot whose order is still on its way: recorded, no new order. Two long flashes.
    case alreadyOrdered
    /// Wi-Fi setup mode: the setup access point is open for the phone. Short-long.
    case wifiSetup

    /// The steps of one cycle, in milliseconds; nil for a steady level (`off`, `orderPlaced`).
    var steps: [(on: Bool, milliseconds: Int)]? {
        switch self {
        case .off, .orderPlaced: nil
        case .pairingMode: [(true, 1000), (false, 1000)]
        case .codeWaiting: [(true, 1500), (false, 500)]
        case .orderSent: [(true, 150), (false, 150)]
        case .needsAttention: [(true, 200), (false, 200), (true, 200), (false, 1400)]
        case .noNetwork: [(true, 100), (false, 150), (true, 100), (false, 150), (true, 100), (false, 2400)]
        case .confirmRepairing: [(true, 80), (false, 80)]
        case .acknowledge: [(true, 300), (false, 300)]
        case .alreadyOrdered: [(true, 700), (false, 300), (true, 700), (false, 300)]
        case .wifiSetup: [(true, 100), (false, 300), (true, 900), (false, 700)]
        }
    }

    /// The steady level of a pattern without steps.
    var steadyOn: Bool { self == .orderPlaced }

    /// What the device shows, most urgent first.
    struct Facts: Sendable {
        var paired = false
        /// The pairing endpoints are served (`PairingWindow`).
        var pairingWindowOpen = false
        /// Code-based linking has a code the customer can enter now (`CodeLinking`).
        var codeWaiting = false
        var tokenFault = false
        var repairingArmed = false
        var pendingOrders = 0
        var parkedOrders = 0
        var lastAttemptFailedForNetwork = false
        var orderJustPlaced = false
        var acknowledging = false
        var alreadyOrdered = false
        /// The Wi-Fi setup access point is open (`WiFiSetup`).
        var wifiSetupOpen = false
    }

    static func pattern(for facts: Facts) -> LEDPattern {
        if facts.repairingArmed { return .confirmRepairing }
        if facts.acknowledging { return .acknowledge }
        if facts.alreadyOrdered { return .alreadyOrdered }
        if facts.wifiSetupOpen { return .wifiSetup }
        if !facts.paired {
            if facts.codeWaiting { return .codeWaiting }
            return facts.pairingWindowOpen ? .pairingMode : .needsAttention
        }
        if facts.tokenFault || facts.parkedOrders > 0 { return .needsAttention }
        if facts.pendingOrders > 0 { return facts.lastAttemptFailedForNetwork ? .noNetwork : .orderSent }
        if facts.orderJustPlaced { return .orderPlaced }
        return .off
    }
}
