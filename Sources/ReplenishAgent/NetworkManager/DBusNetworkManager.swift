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
        var join: NetworkManagerJoin?
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
            if let manager = shared.lock.withLock({ $0.manager.take() }) { cnm_close(manager) }
        }
        pool.shutdownGracefully { _ in }
    }

    func start() async throws -> (online: Bool, savedWiFi: Bool) {
        let started: Result<(Bool, Bool), NetworkManagerUnavailable> = await onThread { [self] in
            var error = [CChar](repeating: 0, count: 512)
            guard let manager = cnm_open(address, &error, error.count) else {
                return .failure(.init(reason: Self.text(error)))
            }
            let accessPointName = accessPointInterface.isEmpty ? stationInterface : accessPointInterface
            guard let station = Self.wifiDevice(manager, stationInterface, &error),
                let accessPoint = Self.wifiDevice(manager, accessPointName, &error)
            else {
                cnm_close(manager)
                return .failure(.init(reason: Self.text(error)))
            }
            shared.lock.withLock { ($0.manager, $0.station, $0.accessPointDevice) = (manager, station, accessPoint) }
            return observe(manager).map(Result.success)
                ?? .failure(.init(reason: "NetworkManager did not answer its state"))
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
        for name in [interface, accessPointInterface] where name == interface || !name.isEmpty {
            guard wifiDevice(manager, name, &error) != nil else { return text(error) }
        }
        return nil
    }

    /// The object path of the Wi-Fi device `name` (empty: NetworkManager's first), or nil with `error` set.
    private static func wifiDevice(_ manager: OpaquePointer, _ name: String, _ error: inout [CChar]) -> String? {
        var path = [CChar](repeating: 0, count: 256)
        return cnm_wifi_device(manager, name, &path, path.count, &error, error.count) == 0 ? text(path) : nil
    }

    func openAccessPoint(ssid: String, passphrase: String, channel: Int) async throws {
        try await activate(ssid: ssid, passphrase: passphrase, accessPoint: true, channel: channel, hidden: false)
    }

    func closeAccessPoint() async {
        _ = try? await onConnection { [shared] (manager, state, error) -> Void? in
            if let active = state.accessPoint { _ = cnm_deactivate(manager, active, &error, error.count) }
            shared.lock.withLock { $0.accessPoint = nil }
            return ()
        }
    }

    func networks() async throws -> [VisibleNetwork] {
        try await onConnection { manager, state, error in
            var found: [VisibleNetwork] = []
            // SAFETY: the pointer to `found` is valid for the whole call, and the callback runs only during it.
            let status = withUnsafeMutablePointer(to: &found) { found in
                cnm_networks(
                    manager, state.station,
                    { ssid, length, strength, frequency, secured, unsupported, userdata in
                        guard let ssid, let userdata else { return }
                        // SAFETY: `userdata` is the pointer to `found` given below, valid during cnm_networks.
                        let found = userdata.assumingMemoryBound(to: [VisibleNetwork].self)
                        // SAFETY: cnm_networks passes the SSID's `length` bytes, valid during the callback.
                        let name = String(decoding: UnsafeBufferPointer(start: ssid, count: length), as: UTF8.self)
                        found.pointee.append(
                            VisibleNetwork(
                                ssid: name, signal: Int(strength),
                                security: unsupported != 0 ? .unsupported : secured != 0 ? .wpa : .open,
                                channel: VisibleNetwork.channel(frequency: frequency)))
                    },
                    found, &error, error.count)
            }
            return status == 0 ? VisibleNetwork.strongestFirst(found) : nil
        }
    }

    func join(ssid: String, passphrase: String?, hidden: Bool) async throws {
        try await activate(ssid: ssid, passphrase: passphrase, accessPoint: false, channel: 0, hidden: hidden)
    }

    func cancelJoin() async {
        _ = try? await onConnection { [shared] (manager, state, error) -> Void? in
            guard let join = state.join else { return () }
            _ = cnm_deactivate(manager, join.active, &error, error.count)
            // A join given up (timed out, or setup closed during it) is not kept for autoconnect.
            if !join.profile.isEmpty { _ = cnm_delete_connection(manager, join.profile, &error, error.count) }
            shared.lock.withLock { $0.join = nil }
            return ()
        }
    }

    func reconnectSaved() async throws -> Bool {
        try await onConnection { manager, state, error in
            var connection = [CChar](repeating: 0, count: 256)
            let status = cnm_reconnect(manager, state.station, &connection, connection.count, &error, error.count)
            return status >= 0 ? status == 0 : nil
        }
    }

    private func activate(ssid: String, passphrase: String?, accessPoint: Bool, channel: Int, hidden: Bool) async throws
    {
        try await onConnection { [shared] (manager, state, error) -> Void? in
            let bytes = Array(ssid.utf8)
            guard
                let started = Self.activation(
                    manager, device: accessPoint ? state.accessPointDevice : state.station, ssid: bytes,
                    passphrase: passphrase, accessPoint: accessPoint, channel: channel, hidden: hidden, error: &error)
            else { return nil }
            shared.lock.withLock {
                if accessPoint {
                    $0.accessPoint = started.active
                } else {
                    $0.join = NetworkManagerJoin(
                        active: started.active, profile: started.profile, retry: hidden ? nil : (bytes, passphrase))
                }
            }
            return ()
        }
    }

    /// Starts a connection on `device`: the access point, or a join (`hidden`: NetworkManager probes for the
    /// network by name). Its active connection's and its profile's object paths, or nil with `error` set.
    private static func activation(
        _ manager: OpaquePointer, device: String, ssid: [UInt8], passphrase: String?, accessPoint: Bool = false,
        channel: Int = 0, hidden: Bool, error: inout [CChar]
    ) -> (active: String, profile: String)? {
        var profile = [CChar](repeating: 0, count: 256)
        var active = [CChar](repeating: 0, count: 256)
        guard
            cnm_activate(
                manager, device, ssid, ssid.count, passphrase, accessPoint ? 1 : 0, UInt32(max(0, channel)),
                hidden ? 1 : 0, &profile, &active, active.count, &error, error.count) == 0
        else { return nil }
        return (text(active), text(profile))
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
        guard cnm_active_state(manager, join.active, device, &active, &reason, &error, error.count) == 0,
            let ending = join.ending(state: active, reason: reason)
        else { return }
        shared.lock.withLock { $0.join = nil }
        if ending != .succeeded, !join.profile.isEmpty {
            _ = cnm_delete_connection(manager, join.profile, &error, error.count)
        }
        switch ending {
        case .succeeded: continuation.yield(.joinSucceeded)
        case .failed(let failure): continuation.yield(.joinFailed(failure))
        case .retryAsHidden(let ssid, let passphrase):
            guard
                let started = Self.activation(
                    manager, device: device, ssid: ssid, passphrase: passphrase, hidden: true, error: &error)
            else {
                continuation.yield(.joinFailed(NetworkManagerJoin.failure(reason: reason)))
                return
            }
            shared.lock.withLock {
                $0.join = NetworkManagerJoin(active: started.active, profile: started.profile, retried: true)
            }
        }
    }

    /// Runs `call` on the thread with the connection, the state and an error buffer; its nil is a failure that
    /// carries NetworkManager's message from the buffer.
    private func onConnection<T: Sendable>(
        _ call: @escaping @Sendable (OpaquePointer, State, inout [CChar]) -> T?
    ) async throws -> T {
        let result: Result<T, NetworkManagerUnavailable> = await onThread { [shared] in
            let state = shared.lock.withLock { $0 }
            guard let manager = state.manager else { return .failure(.init(reason: "NetworkManager is not connected")) }
            var error = [CChar](repeating: 0, count: 512)
            guard let value = call(manager, state, &error) else { return .failure(.init(reason: Self.text(error))) }
            return .success(value)
        }
        return try result.get()
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
