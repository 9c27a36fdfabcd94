import CNetworkManager
import NIOPosix
import Synchronization

/// NetworkManager through its D-Bus API (`CNetworkManager`, libdbus-1 loaded only when this is first used), on a
/// thread of its own: every call blocks on the system bus. While it runs, the thread waits for NetworkManager's
/// signals in turns of `turn` and reports what changed (`changes`), so it is made only when setup mode may be
/// needed, never on a unit that is on its network.
///
/// The access point and the home network may be on two interfaces of one radio (`accessPointInterface`, such as
/// `ap0` made with `iw … interface add ap0 type __ap`), so that the access point stays up while the unit joins the
/// home network; on one interface NetworkManager takes the access point down for the join.
final class DBusNetworkManager: NetworkManagerControl {
    // SAFETY: the manager pointer is used only on the pool's one thread (every cnm_ call runs there); the
    // Mutex guards the fields themselves.
    private struct State: @unchecked Sendable {
        var manager: OpaquePointer?
        var station = ""
        var accessPointDevice = ""
        var accessPoint: String?
        var join: String?
        /// The saved profile of the join under way: deleted if the join fails, so that a wrong passphrase is not
        /// tried again by NetworkManager's autoconnect.
        var joinProfile: String?
        /// A visible network's join, kept for one more try as a hidden network (a directed probe) when
        /// NetworkManager answers "SSID not found": its list of access points can lose a network it just
        /// listed (a scan on the radio that also holds the access point came back empty on a loaded booted
        /// device). `retried` once that try is made.
        var retry: (ssid: [UInt8], passphrase: String?)?
        var retried = false
        var last: (online: Bool, saved: Bool)?
    }

    private let address: String?
    private let stationInterface: String
    private let accessPointInterface: String
    private let turn: Int32
    private let pool = NIOThreadPool(numberOfThreads: 1)
    /// The state, in a box the pool's last task can hold after this object is gone (deinit closes the connection
    /// there).
    private final class Shared: Sendable {
        let lock = Mutex(State())
    }
    private let shared = Shared()
    private let (stream, continuation) = AsyncStream.makeStream(of: NetworkManagerChange.self)

    /// `interface`: the Wi-Fi interface that joins networks (empty: NetworkManager's first Wi-Fi device);
    /// `accessPointInterface`: the one that runs the access point (empty: the same); `address`: a bus other than
    /// the system bus (tests).
    init(
        interface: String = "", accessPointInterface: String = "", address: String? = nil,
        turn: Duration = .seconds(30)
    ) {
        self.address = address
        stationInterface = interface
        self.accessPointInterface = accessPointInterface
        self.turn = Int32(turn.components.seconds * 1000 + turn.components.attoseconds / 1_000_000_000_000_000)
        pool.start()
    }

    deinit {
        continuation.finish()
        // Closed on the pool's thread, after the wait it may be in: never under a call that uses the connection.
        let shared = shared
        pool.submit { _ in
            if let manager = shared.lock.withLock({ value in
                defer { value.manager = nil }
                return value.manager
            }) {
                cnm_close(manager)
            }
        }
        pool.shutdownGracefully { _ in }
    }

    func start() async throws -> (online: Bool, savedWiFi: Bool) {
        let started: Result<(Bool, Bool), NetworkManagerUnavailable> = await onThread { [self] in
            var error = [CChar](repeating: 0, count: 512)
            guard let manager = cnm_open(address, &error, error.count) else {
                return .failure(.init(reason: Self.text(error)))
            }
            var station = [CChar](repeating: 0, count: 256)
            var accessPoint = [CChar](repeating: 0, count: 256)
            guard cnm_wifi_device(manager, stationInterface, &station, station.count, &error, error.count) == 0,
                cnm_wifi_device(
                    manager, accessPointInterface.isEmpty ? stationInterface : accessPointInterface, &accessPoint,
                    accessPoint.count, &error, error.count) == 0
            else {
                cnm_close(manager)
                return .failure(.init(reason: Self.text(error)))
            }
            shared.lock.withLock {
                $0.manager = manager
                $0.station = Self.text(station)
                $0.accessPointDevice = Self.text(accessPoint)
            }
            guard let now = observe(manager) else {
                return .failure(.init(reason: "NetworkManager did not answer its state"))
            }
            return .success(now)
        }
        let now = try started.get()
        watch()
        return (online: now.0, savedWiFi: now.1)
    }

    func changes() -> AsyncStream<NetworkManagerChange> { stream }

    /// For `check-config`: nil when NetworkManager answers on the system bus with the Wi-Fi devices named (empty:
    /// any), else why setup mode is unavailable. Blocks on the bus (at most `CNM_TIMEOUT_MS` a call).
    static func probe(interface: String, accessPointInterface: String) -> String? {
        var error = [CChar](repeating: 0, count: 512)
        guard let manager = cnm_open(nil, &error, error.count) else { return text(error) }
        defer { cnm_close(manager) }
        var path = [CChar](repeating: 0, count: 256)
        for name in [interface, accessPointInterface] where name == interface || !name.isEmpty {
            guard cnm_wifi_device(manager, name, &path, path.count, &error, error.count) == 0 else {
                return text(error)
            }
        }
        return nil
    }

    func openAccessPoint(ssid: String, passphrase: String, channel: Int) async throws {
        try await activate(ssid: ssid, passphrase: passphrase, accessPoint: true, channel: channel, hidden: false)
    }

    func closeAccessPoint() async {
        await onThread { [self] in
            let (manager, active) = shared.lock.withLock { ($0.manager, $0.accessPoint) }
            guard let manager, let active else { return }
            var error = [CChar](repeating: 0, count: 512)
            _ = cnm_deactivate(manager, active, &error, error.count)
            shared.lock.withLock { $0.accessPoint = nil }
        }
    }

    func networks() async throws -> [VisibleNetwork] {
        let listed: Result<[VisibleNetwork], NetworkManagerUnavailable> = await onThread { [self] in
            let (manager, device) = shared.lock.withLock { ($0.manager, $0.station) }
            guard let manager else { return .failure(.init(reason: "NetworkManager is not connected")) }
            final class Found { var networks: [VisibleNetwork] = [] }
            let found = Found()
            var error = [CChar](repeating: 0, count: 512)
            let status = withExtendedLifetime(found) {
                cnm_networks(
                    manager, device,
                    { ssid, length, strength, frequency, secured, unsupported, userdata in
                        guard let ssid, let userdata else { return }
                        // SAFETY: `userdata` is `found`, kept alive by withExtendedLifetime for the whole call,
                        // and the callback runs only during cnm_networks.
                        let found = Unmanaged<Found>.fromOpaque(userdata).takeUnretainedValue()
                        // SAFETY: cnm_networks passes the SSID's `length` bytes, valid during the callback.
                        let name = String(decoding: UnsafeBufferPointer(start: ssid, count: length), as: UTF8.self)
                        found.networks.append(
                            VisibleNetwork(
                                ssid: name, signal: Int(strength),
                                security: unsupported != 0 ? .unsupported : secured != 0 ? .wpa : .open,
                                channel: VisibleNetwork.channel(frequency: frequency)))
                    },
                    // SAFETY: unretained: `found` outlives the call (withExtendedLifetime above).
                    Unmanaged.passUnretained(found).toOpaque(), &error, error.count)
            }
            guard status == 0 else { return .failure(.init(reason: Self.text(error))) }
            return .success(Self.strongestFirst(found.networks))
        }
        return try listed.get()
    }

    func join(ssid: String, passphrase: String?, hidden: Bool) async throws {
        try await activate(ssid: ssid, passphrase: passphrase, accessPoint: false, channel: 0, hidden: hidden)
    }

    func cancelJoin() async {
        await onThread { [self] in
            let (manager, active, profile) = shared.lock.withLock { ($0.manager, $0.join, $0.joinProfile) }
            guard let manager, let active else { return }
            var error = [CChar](repeating: 0, count: 512)
            _ = cnm_deactivate(manager, active, &error, error.count)
            // A join given up (timed out, or setup closed during it) is not kept for autoconnect.
            if let profile, !profile.isEmpty { _ = cnm_delete_connection(manager, profile, &error, error.count) }
            shared.lock.withLock { (value: inout State) in (value.join, value.joinProfile) = (nil, nil) }
        }
    }

    func reconnectSaved() async throws -> Bool {
        let asked: Result<Bool, NetworkManagerUnavailable> = await onThread { [self] in
            let (manager, device) = shared.lock.withLock { ($0.manager, $0.station) }
            guard let manager else { return .failure(.init(reason: "NetworkManager is not connected")) }
            var connection = [CChar](repeating: 0, count: 256)
            var error = [CChar](repeating: 0, count: 512)
            let status = cnm_reconnect(manager, device, &connection, connection.count, &error, error.count)
            guard status >= 0 else { return .failure(.init(reason: Self.text(error))) }
            return .success(status == 0)
        }
        return try asked.get()
    }

    /// One network per SSID (the strongest of its access points), strongest first.
    static func strongestFirst(_ networks: [VisibleNetwork]) -> [VisibleNetwork] {
        var best: [String: VisibleNetwork] = [:]
        for network in networks where (best[network.ssid]?.signal ?? -1) < network.signal {
            best[network.ssid] = network
        }
        return best.values.sorted { ($0.signal, $1.ssid) > ($1.signal, $0.ssid) }
    }

    /// A join's end from NetworkManager's device reason (`NMDeviceStateReason`).
    static func failure(reason: UInt32) -> NetworkSetupJoinFailure {
        switch reason {
        case 7, 8, 9: .wrongPassphrase  // no secrets; the supplicant disconnected or refused the key
        case 53: .notFound  // SSID not found
        case 15, 16, 17: .noDHCP  // DHCP could not start, failed, or timed out
        case 11: .timedOut  // the supplicant timed out
        default: .dropped
        }
    }

    private func activate(ssid: String, passphrase: String?, accessPoint: Bool, channel: Int, hidden: Bool) async throws
    {
        let done: Result<Void, NetworkManagerUnavailable> = await onThread { [self] in
            let (manager, device) = shared.lock.withLock {
                ($0.manager, accessPoint ? $0.accessPointDevice : $0.station)
            }
            guard let manager else { return .failure(.init(reason: "NetworkManager is not connected")) }
            var profile = [CChar](repeating: 0, count: 256)
            var active = [CChar](repeating: 0, count: 256)
            var error = [CChar](repeating: 0, count: 512)
            let bytes = Array(ssid.utf8)
            let status = cnm_activate(
                manager, device, bytes, bytes.count, passphrase, accessPoint ? 1 : 0, UInt32(max(0, channel)),
                hidden ? 1 : 0, &profile, &active, active.count, &error, error.count)
            guard status == 0 else { return .failure(.init(reason: Self.text(error))) }
            shared.lock.withLock {
                if accessPoint {
                    $0.accessPoint = Self.text(active)
                } else {
                    $0.join = Self.text(active)
                    $0.joinProfile = Self.text(profile)
                    $0.retry = hidden ? nil : (bytes, passphrase)
                    $0.retried = false
                }
            }
            return .success(())
        }
        try done.get()
    }

    /// Waits a turn for NetworkManager's signals, reports what changed, and goes again until NetworkManager goes.
    private func watch() {
        pool.submit { [weak self] poolState in
            guard case .active = poolState, let self, let manager = self.shared.lock.withLock({ $0.manager }) else {
                return
            }
            if cnm_wait(manager, self.turn) < 0 {
                self.continuation.yield(.gone(reason: "the system bus closed the connection to NetworkManager"))
                return
            }
            if self.observe(manager) == nil {
                self.continuation.yield(.gone(reason: "NetworkManager stopped answering"))
                return
            }
            self.followJoin(manager)
            self.watch()
        }
    }

    /// Reads the state and the saved connections, and reports what changed since the last read.
    private func observe(_ manager: OpaquePointer) -> (Bool, Bool)? {
        var state: UInt32 = 0
        var connectivity: UInt32 = 0
        var saved: Int32 = 0
        var error = [CChar](repeating: 0, count: 512)
        guard cnm_state(manager, &state, &connectivity, &error, error.count) == 0,
            cnm_saved_wifi(manager, &saved, &error, error.count) == 0
        else { return nil }
        let now = (online: state == 70 || connectivity == 4, saved: saved > 0)
        let last = self.shared.lock.withLock { value in
            defer { value.last = now }
            return value.last
        }
        if let last {
            if last.online != now.online { continuation.yield(.connectivity(online: now.online)) }
            if last.saved != now.saved { continuation.yield(.savedWiFi(now.saved)) }
        }
        return (now.online, now.saved)
    }

    /// A join under way that NetworkManager finished: activated, or deactivated with the device's reason.
    private func followJoin(_ manager: OpaquePointer) {
        let (join, device) = shared.lock.withLock { ($0.join, $0.station) }
        guard let join else { return }
        var active: UInt32 = 0
        var reason: UInt32 = 0
        var error = [CChar](repeating: 0, count: 512)
        guard cnm_active_state(manager, join, device, &active, &reason, &error, error.count) == 0 else { return }
        switch active {
        case 2:
            shared.lock.withLock { (value: inout State) in (value.join, value.joinProfile) = (nil, nil) }
            continuation.yield(.joinSucceeded)
        case 3, 4:
            let (profile, retry, retried) = shared.lock.withLock { value in
                defer { (value.join, value.joinProfile, value.retry) = (nil, nil, nil) }
                return (value.joinProfile, value.retry, value.retried)
            }
            if let profile, !profile.isEmpty { _ = cnm_delete_connection(manager, profile, &error, error.count) }
            if reason == 53, let retry, retryAsHidden(manager, device: device, retry) { return }
            // The try as a hidden network timing out means the same: no such network in range.
            let failure: NetworkSetupJoinFailure = retried && reason == 11 ? .notFound : Self.failure(reason: reason)
            continuation.yield(.joinFailed(failure))
        default: break
        }
    }

    /// The join again as a hidden network (NetworkManager then probes for it by name); true when it started.
    private func retryAsHidden(_ manager: OpaquePointer, device: String, _ retry: (ssid: [UInt8], passphrase: String?))
        -> Bool
    {
        var profile = [CChar](repeating: 0, count: 256)
        var active = [CChar](repeating: 0, count: 256)
        var error = [CChar](repeating: 0, count: 512)
        guard
            cnm_activate(
                manager, device, retry.ssid, retry.ssid.count, retry.passphrase, 0, 0, 1, &profile, &active,
                active.count, &error, error.count) == 0
        else { return false }
        shared.lock.withLock {
            $0.join = Self.text(active)
            $0.joinProfile = Self.text(profile)
            $0.retried = true
        }
        return true
    }

    private func onThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            pool.submit { _ in continuation.resume(returning: work()) }
            // The thread may be waiting for signals (up to `turn`): end the wait, so the call runs now. Under the
            // lock, so that the connection is not closed meanwhile.
            shared.lock.withLock { value in if let manager = value.manager { cnm_wake(manager) } }
        }
    }

    private static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
