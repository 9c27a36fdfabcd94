import Synchronization

/// The host name avahi-daemon publishes the pairing service under (`name.local`, or `name-2.local` when another
/// host on the network had the name first, as units made from one image do): the advertiser writes it when the
/// service is established, and the pairing server's Host check reads it (`PairingRequestGuard.deviceNames`), so
/// that a phone that resolved the service may name the host it was given.
final class PublishedHostName: Sendable {
    private let name = Mutex<String?>(nil)

    init() {}

    /// The name avahi said, lowercased and without its trailing dot; nil keeps the one known.
    func set(_ hostName: String?) {
        guard var host = hostName?.lowercased(), !host.isEmpty else { return }
        if host.hasSuffix(".") { host.removeLast() }
        name.withLock { $0 = host }
    }

    var value: String? { name.withLock { $0 } }
}
