import Foundation
import Synchronization
import Testing

@testable import ReplenishAgent

/// `DBusNetworkManager` (and `CNetworkManager` below it, libdbus-1 loaded with dlopen) against a fake
/// NetworkManager on a private bus (`Fixtures/fake-networkmanager.py`, python3-dbus): the calls it makes, the
/// settings it asks for, and what it reports back. The real NetworkManager is the booted devices' part.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct DBusNetworkManagerTests {
    /// A private bus with the fake NetworkManager on it; the bus's address.
    func startFake(_ harness: Harness) throws -> String {
        let address = "unix:path=\(harness.directory)/bus"
        try harness.start(
            "/usr/bin/dbus-daemon", ["--session", "--address=\(address)", "--nofork", "--nopidfile"], log: "bus.log")
        try harness.waitUntil("the private bus") { FileManager.default.fileExists(atPath: harness.directory + "/bus") }
        try harness.start(
            "/usr/bin/python3",
            [
                packageRoot() + "/Tests/ReplenishAgentTests/Fixtures/fake-networkmanager.py", address,
                harness.directory + "/calls.log",
            ], log: "fake.log")
        try harness.waitUntil("the fake NetworkManager") { harness.read("fake.log").contains("ready") }
        return address
    }

    /// The fake's log: one JSON object a call.
    func calls(_ harness: Harness) throws -> [[String: Any]] {
        try harness.read("calls.log").split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
    }

    /// What the adapter reported, collected as it comes.
    final class Changes: Sendable {
        final class Seen: Sendable { let list = Mutex<[NetworkManagerChange]>([]) }
        let seen = Seen()
        let consumer: Task<Void, Never>
        init(_ manager: DBusNetworkManager) {
            consumer = Task { [seen] in
                for await change in manager.changes() { seen.list.withLock { $0.append(change) } }
            }
        }
        deinit { consumer.cancel() }

        /// Polls (every 20 ms, for at most 10 s) until `count` changes came; those changes.
        func first(_ count: Int) async -> [NetworkManagerChange] {
            var polls = 0
            while polls < 500, seen.list.withLock({ $0.count }) < count {
                polls += 1
                try? await Task.sleep(for: .milliseconds(20))
            }
            return seen.list.withLock { Array($0.prefix(count)) }
        }

        /// Polls (every 20 ms, for at most 10 s) until a change `matches`; every change so far.
        func until(_ matches: (NetworkManagerChange) -> Bool) async -> [NetworkManagerChange] {
            var polls = 0
            while polls < 500, !seen.list.withLock({ $0.contains(where: matches) }) {
                polls += 1
                try? await Task.sleep(for: .milliseconds(20))
            }
            return seen.list.withLock { $0 }
        }
    }

    @Test func theAdapterOpensTheLabelsAccessPointListsNetworksAndReportsEachJoin() async throws {
        let harness = Harness()
        let address = try startFake(harness)
        let manager = DBusNetworkManager(interface: "wlan0", address: address, turn: .milliseconds(100))
        let started = try await manager.start()
        #expect(started.online == false && started.savedWiFi == false)

        // One entry per SSID, strongest first; 802.1X is offered as unsupported.
        let networks = try await manager.networks()
        #expect(
            networks == [
                .init(ssid: "Home Net", signal: 80, security: .wpa, channel: 6),
                .init(ssid: "Corp", signal: 50, security: .unsupported, channel: 36),
                .init(ssid: "Cafe", signal: 30, security: .open, channel: 11),
            ])

        let accessPoint = SetupAccessPoint(serial: "SN0001", key: SetupKey(hex: "000102030405060708090a0b0c0d0e0f")!)
        try await manager.openAccessPoint(ssid: accessPoint.ssid, passphrase: accessPoint.passphrase.value, channel: 6)
        let opened = try #require(try calls(harness).first { $0["call"] as? String == "AddAndActivateConnection2" })
        let settings = try #require(opened["settings"] as? [String: [String: Any]])
        #expect(settings["802-11-wireless"]?["mode"] as? String == "ap")
        #expect(settings["802-11-wireless"]?["ssid"] as? String == "Replenish-91cb")
        #expect(settings["802-11-wireless"]?["channel"] as? Int == 6, "on the home network's channel")
        #expect(settings["802-11-wireless"]?["band"] as? String == "bg")
        #expect(settings["802-11-wireless-security"]?["key-mgmt"] as? String == "wpa-psk")
        #expect(settings["802-11-wireless-security"]?["psk"] as? String == accessPoint.passphrase.value)
        #expect(settings["802-11-wireless-security"]?["proto"] as? [String] == ["rsn"])
        #expect(settings["ipv4"]?["method"] as? String == "shared", "NetworkManager's own DHCP for the phone")
        #expect((opened["options"] as? [String: String])?["persist"] == "volatile", "the access point is never saved")

        // Changes come through the stream, one join at a time.
        let changes = Changes(manager)
        try await manager.join(ssid: "Home Net", passphrase: "wrong horse", hidden: false)
        #expect(await changes.first(1) == [.joinFailed(.wrongPassphrase)])
        try await manager.join(ssid: "Elsewhere", passphrase: "correct horse", hidden: false)
        #expect(await changes.first(2).last == .joinFailed(.notFound))
        // "SSID not found" is tried once more as a hidden network (a directed probe), then reported.
        let elsewhere = try calls(harness).filter {
            ($0["settings"] as? [String: [String: Any]])?["802-11-wireless"]?["ssid"] as? String == "Elsewhere"
        }
        #expect(elsewhere.count == 2)
        #expect(
            elsewhere.last.flatMap {
                ($0["settings"] as? [String: [String: Any]])?["802-11-wireless"]?["hidden"] as? Bool
            } == true)
        // Each failed join's profile is deleted: NetworkManager's autoconnect never retries a wrong passphrase.
        #expect(try calls(harness).filter { $0["call"] as? String == "Delete" }.count == 3)
        try await manager.join(ssid: "Home Net", passphrase: "correct horse", hidden: false)
        let joined = await changes.first(5).dropFirst(2)
        #expect(Set(joined.map { "\($0)" }) == Set(["joinSucceeded", "connectivity(online: true)", "savedWiFi(true)"]))

        await manager.closeAccessPoint()
        let deactivated = try calls(harness).filter { $0["call"] as? String == "DeactivateConnection" }
        #expect(deactivated.count == 1)
        let saved = try calls(harness).filter {
            ($0["settings"] as? [String: [String: Any]])?["802-11-wireless"]?["mode"] as? String == "infrastructure"
        }
        #expect(saved.allSatisfy { ($0["options"] as? [String: String])?["persist"] == "disk" })

        // NetworkManager going away is reported, not waited for.
        _ = try harness.run(
            "/usr/bin/dbus-send",
            [
                "--bus=\(address)", "--print-reply", "--dest=org.freedesktop.NetworkManager", "/org/replenish/Test",
                "org.replenish.Test.Quit",
            ])
        let seen = await changes.until { if case .gone = $0 { true } else { false } }
        #expect(seen.contains { if case .gone = $0 { true } else { false } }, "\(seen)")
    }

    /// A saved network NetworkManager does not join again on its own (its autoconnect blocked after a handshake
    /// that timed out) is joined again when the keeper asks: the saved station's connection, never the access
    /// point's, and only while the radio is disconnected.
    @Test func aSavedNetworkIsJoinedAgainOnlyWhenDisconnected() async throws {
        let harness = Harness()
        let address = try startFake(harness)
        let manager = DBusNetworkManager(interface: "wlan0", address: address, turn: .milliseconds(100))
        _ = try await manager.start()
        let changes = Changes(manager)
        func activations() throws -> [[String: Any]] {
            try calls(harness).filter { $0["call"] as? String == "ActivateConnection" }
        }
        #expect(try await manager.reconnectSaved() == false, "no saved network: nothing to ask")

        let accessPoint = SetupAccessPoint(serial: "SN0001", key: SetupKey(hex: "000102030405060708090a0b0c0d0e0f")!)
        try await manager.openAccessPoint(ssid: accessPoint.ssid, passphrase: accessPoint.passphrase.value, channel: 6)
        #expect(try await manager.reconnectSaved() == false, "the access point's connection is not a saved network")
        try await manager.join(ssid: "Home Net", passphrase: "correct horse", hidden: false)
        _ = await changes.until { $0 == .connectivity(online: true) }
        #expect(try await manager.reconnectSaved() == false, "connected: nothing to ask")
        #expect(try activations().isEmpty)

        _ = try harness.run(
            "/usr/bin/dbus-send",
            [
                "--bus=\(address)", "--print-reply", "--dest=org.freedesktop.NetworkManager", "/org/replenish/Test",
                "org.replenish.Test.SetOnline", "boolean:false",
            ])
        _ = await changes.until { $0 == .connectivity(online: false) }
        #expect(try await manager.reconnectSaved() == true)
        let asked = try #require(try activations().first)
        #expect(asked["device"] as? String == "/org/freedesktop/NetworkManager/Devices/1")
        #expect(asked["specific"] as? String == "/")
        // The fake numbers connections in the order of the calls: 101 is the access point's (listed first while
        // it is up), 102 the home network's.
        #expect(asked["connection"] as? String == "/org/freedesktop/NetworkManager/Settings/102")
        // The join's three changes, the drop, and the way back.
        let seen = await changes.first(5)
        #expect(seen.filter { $0 == .connectivity(online: true) }.count == 2, "\(seen)")
        #expect(seen.last == .connectivity(online: true), "back on the network: \(seen)")
        #expect(try activations().count == 1)
    }

    @Test func withoutNetworkManagerOrAWiFiDeviceStartSaysWhy() async throws {
        let harness = Harness()
        let missing = DBusNetworkManager(address: "unix:path=\(harness.directory)/no-bus")
        await #expect(throws: NetworkManagerUnavailable.self) { try await missing.start() }
        let address = try startFake(harness)
        let other = DBusNetworkManager(interface: "wlan9", address: address)
        do {
            _ = try await other.start()
            Issue.record("a device that does not exist was accepted")
        } catch {
            #expect("\(error)" == "NetworkManager has no Wi-Fi device wlan9")
        }
    }

    /// The thread waits for NetworkManager's signals in long turns (30 s on the device): a call made meanwhile
    /// ends the wait and runs at once, instead of sitting out the turn (on the booted device the phone's POST
    /// went unanswered for 15 s).
    @Test func aCallDuringALongWaitRunsAtOnce() async throws {
        let harness = Harness()
        let address = try startFake(harness)
        let manager = DBusNetworkManager(interface: "wlan0", address: address, turn: .seconds(20))
        _ = try await manager.start()
        // The watch is now in its wait; let it settle there.
        try await Task.sleep(for: .milliseconds(300))
        let clock = ContinuousClock()
        let took = try await clock.measure { _ = try await manager.networks() }
        #expect(took < .seconds(10), "the call waited \(took) for the turn to end")
    }
}
