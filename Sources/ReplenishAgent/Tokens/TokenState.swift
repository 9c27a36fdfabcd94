/// The token lifecycle: unpaired → fresh → refreshing → (fresh | retry-wait | needs-pairing). What the
/// daemon publishes, the status file records and `status` shows of the tokens (never a token).
enum TokenState: Sendable, Equatable, Codable {
    case unpaired
    case fresh(expiresAt: Double)
    case refreshing(expiresAt: Double)
    case retryWait(expiresAt: Double, reason: String)
    case needsPairing(reason: String)

    /// The state's kind, as `status` names it.
    enum Kind: String, Sendable, Codable, CaseIterable {
        case unpaired
        case fresh
        case refreshing
        case retryWait = "retry-wait"
        case needsPairing = "needs-pairing"

        /// The device holds tokens in this state.
        var isPaired: Bool { self != .unpaired && self != .needsPairing }
    }

    var kind: Kind {
        switch self {
        case .unpaired: .unpaired
        case .fresh: .fresh
        case .refreshing: .refreshing
        case .retryWait: .retryWait
        case .needsPairing: .needsPairing
        }
    }

    var name: String { kind.rawValue }

    /// The state of a token manager holding tokens that expire at `expiresAt` (nil: none), from what it knows:
    /// a hold (`TokenManager.hold`), a refresh out, the last failure, a client secret not checked yet, why the
    /// pairing was lost.
    init(
        expiresAt: Double?, heldBecause: String?, refreshing: Bool, lastFailure: String?, secretUnchecked: String?,
        lostReason: String?
    ) {
        guard let expiresAt else {
            self = lostReason.map { .needsPairing(reason: $0) } ?? .unpaired
            return
        }
        if let heldBecause {
            self = .retryWait(expiresAt: expiresAt, reason: heldBecause)
        } else if refreshing {
            self = .refreshing(expiresAt: expiresAt)
        } else if let lastFailure {
            self = .retryWait(
                expiresAt: expiresAt, reason: secretUnchecked.map { "\($0): \(lastFailure)" } ?? lastFailure)
        } else if let secretUnchecked {
            self = .retryWait(expiresAt: expiresAt, reason: secretUnchecked)
        } else {
            self = .fresh(expiresAt: expiresAt)
        }
    }

    var reason: String? {
        switch self {
        case .retryWait(_, let reason), .needsPairing(let reason): reason
        default: nil
        }
    }
}

/// What the token manager tells the services that follow it.
enum TokenEvent: Sendable, Equatable {
    /// The state changed (pairing, refresh started or ended, loss).
    case changed(TokenState)
    /// A pairing stored new tokens.
    case paired
    /// The tokens were wiped: LWA no longer accepts them, or the customer asked.
    case pairingLost
}

extension TokenEvent {
    /// New tokens at hand (a pairing, a refresh that succeeded): what lets waiting orders go.
    var letsOrdersGo: Bool {
        switch self {
        case .paired, .changed(.fresh): true
        default: false
        }
    }

    /// A pairing made or lost: what the pairing window and code-based linking follow.
    var isPairingChange: Bool { self == .paired || self == .pairingLost }

    /// Whether the event is a refresh beginning: only the followers that show "refreshing" hear it
    /// (`Broadcast.subscribe(where:)`): the status files and systemd's status line.
    var isRefreshStarting: Bool {
        if case .changed(.refreshing) = self { true } else { false }
    }
}

extension AsyncStream where Element == TokenEvent {
    /// Calls `body` with true at each pairing and false at each lost pairing, until the stream ends: what
    /// the pairing window and code-based linking follow.
    func forEachPairingChange(_ body: (_ paired: Bool) async -> Void) async {
        for await event in self {
            switch event {
            case .paired: await body(true)
            case .pairingLost: await body(false)
            case .changed: break
            }
        }
    }
}
