/// A join that NetworkManager runs for setup mode, and what its end means: a plain value, no D-Bus
/// (`DBusNetworkManager` makes the calls it asks for).
struct NetworkManagerJoin: Sendable {
    /// The active connection's object path.
    var active: String
    /// The profile NetworkManager saved for it: deleted if the join fails, so that a wrong passphrase is not
    /// tried again by NetworkManager's autoconnect.
    var profile: String
    /// A visible network's join, kept for one more try as a hidden network (a directed probe) when
    /// NetworkManager answers "SSID not found": its list of access points can lose a network it just listed (a
    /// scan on the radio that also holds the access point came back empty on a loaded booted device).
    var retry: (ssid: [UInt8], passphrase: String?)?
    /// Whether this is that one more try.
    var retried = false

    /// How a join ended, and what that calls for.
    enum Ending: Equatable {
        case succeeded
        case retryAsHidden(ssid: [UInt8], passphrase: String?)
        case failed(NetworkSetupJoinFailure)
    }

    /// The ending for its active connection's `state` (`NMActiveConnectionState`) and its device's `reason`
    /// (`NMDeviceStateReason`); nil while it is still activating.
    func ending(state: UInt32, reason: UInt32) -> Ending? {
        switch state {
        case 2: return .succeeded  // activated
        case 3, 4: break  // deactivating, deactivated
        default: return nil
        }
        if reason == Self.ssidNotFound, let retry, !retried {
            return .retryAsHidden(ssid: retry.ssid, passphrase: retry.passphrase)
        }
        // The try as a hidden network timing out means the same: no such network in range.
        return .failed(retried && reason == Self.supplicantTimedOut ? .notFound : Self.failure(reason: reason))
    }

    static let ssidNotFound: UInt32 = 53
    static let supplicantTimedOut: UInt32 = 11

    /// A join's failure from NetworkManager's device reason.
    static func failure(reason: UInt32) -> NetworkSetupJoinFailure {
        switch reason {
        case 7, 8, 9: .wrongPassphrase  // no secrets; the supplicant disconnected or refused the key
        case ssidNotFound: .notFound
        case 15, 16, 17: .noDHCP  // DHCP could not start, failed, or timed out
        case supplicantTimedOut: .timedOut
        default: .dropped
        }
    }
}
