import NIOHTTP1
import Testing

@testable import ReplenishAgent

/// The Host names a phone uses for the pairing port (issue 51, point 5): the host name avahi-daemon published,
/// which after a conflict is not the system's (`name-2.local`, two units of one image on one network), and an
/// IPv6 link-local address with the phone's zone; anything else stays refused (DNS rebinding stays closed).
@Suite(.tags(.unit)) struct PairingHostTests {
    static let names = PairingRequestGuard.deviceNames(listenHost: "0.0.0.0", published: "unit-2.local")
        .union(["fe80::1", "192.168.1.20"])

    func status(_ host: String) -> Int? {
        PairingRequestGuard.refusal(
            ServerRequest(
                method: .GET, path: "/provision/deviceInfo", body: [], headers: HTTPHeaders([("Host", host)])),
            deviceNames: Self.names, port: 8642)?.status
    }

    @Test(arguments: [
        "unit-2.local", "UNIT-2.local:8642", "unit-2.local.", "unit-2", "[fe80::1%25wlan0]:8642", "[fe80::1%wlan0]",
        "[FE80::1%25eth0]",
    ])
    func thePublishedNameAndALinkLocalAddressWithAZoneAreServed(host: String) {
        #expect(status(host) == nil, "\(host)")
    }

    @Test(arguments: [
        "unit-3.local", "[fe80::2%25wlan0]:8642", "fe80::1%25wlan0", "[fe80::1%25wlan0", "unit-2.local.evil.example",
        "[%25wlan0]",
    ])
    func otherNamesStayRefused(host: String) {
        #expect(status(host) == 421, "\(host)")
    }

    @Test func thePublishedNameIsKeptAsAvahiSaidIt() {
        let published = PublishedHostName()
        #expect(published.value == nil)
        published.set("Unit-2.local.")
        #expect(published.value == "unit-2.local")
        published.set(nil)
        #expect(published.value == "unit-2.local", "a change without a name keeps the one known")
        #expect(!PairingRequestGuard.deviceNames(listenHost: "0.0.0.0").contains("unit-2.local"))
    }
}
