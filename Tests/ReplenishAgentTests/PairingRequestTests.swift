import Foundation
import NIOHTTP1
import Synchronization
import Testing

@testable import ReplenishAgent

/// The requests on the pairing port: the request guard, the session rate limits, the client id check and the
/// connection admission, pure decisions on a manual clock, and the coordinator with in-memory doubles.
@Suite(.tags(.unit)) struct PairingRequestTests {
    let clock = ManualClock()

    func at(_ seconds: Int) -> ManualClock.Instant { ManualClock.Instant(offset: .seconds(seconds)) }

    // MARK: the request guard

    @Test func unknownHostNamesMakeTheDeviceReadItsNamesAgainAtMostEveryFiveSeconds() {
        #expect(PairingRequestGuard.mayReadNamesAgain(lastReadAt: nil as ManualClock.Instant?, now: at(0)))
        #expect(!PairingRequestGuard.mayReadNamesAgain(lastReadAt: at(10), now: at(14)))
        #expect(PairingRequestGuard.mayReadNamesAgain(lastReadAt: at(10), now: at(15)))
    }

    static let names: Set<String> = [
        "192.168.1.20", "fe80::1", "device", "device.local", "localhost", "127.0.0.1", "::1",
    ]

    func refusal(_ headers: [(String, String)], method: HTTPMethod = .GET) -> Int? {
        PairingRequestGuard.refusal(
            ServerRequest(method: method, path: "/provision/deviceInfo", body: [], headers: HTTPHeaders(headers)),
            deviceNames: Self.names, port: 8642)?.status
    }

    @Test(arguments: [
        "192.168.1.20", "192.168.1.20:8642", "device", "DEVICE.local:8642", "device.local.", "[fe80::1]",
        "[fe80::1]:8642", "localhost:8642", "127.0.0.1", "[::1]:8642",
    ])
    func hostsNamingTheDeviceAreServed(host: String) {
        #expect(refusal([("Host", host)]) == nil)
    }

    @Test(arguments: [
        "evil.example", "evil.example:8642", "192.168.1.21", "192.168.1.20:80", "device.evil.example", "",
        "[fe80::1", "fe80::1", "192.168.1.20:8642:1", "192.168.1.20:x",
    ])
    func hostsNamingSomethingElseAre421(host: String) {
        #expect(refusal([("Host", host)]) == 421)
    }

    @Test func noHostOrTwoHostsOrAnOriginOrAFormPostAreRefused() {
        #expect(refusal([]) == 421)
        #expect(refusal([("Host", "device"), ("Host", "evil.example")]) == 421)
        #expect(refusal([("Host", "device"), ("Origin", "http://device")]) == 403)
        #expect(refusal([("Host", "device"), ("Origin", "null")]) == 403)
        #expect(refusal([("Host", "device")], method: .POST) == 415)
        #expect(refusal([("Host", "device"), ("Content-Type", "text/plain")], method: .POST) == 415)
        #expect(
            refusal([("Host", "device"), ("Content-Type", "application/x-www-form-urlencoded")], method: .POST) == 415)
        #expect(
            refusal([("Host", "device"), ("Content-Type", "Application/JSON; charset=utf-8")], method: .POST) == nil)
        #expect(refusal([("Host", "device"), ("Content-Type", "application/json")], method: .POST) == nil)
    }

    @Test func theMachinesOwnNamesAreKnown() {
        let names = PairingRequestGuard.deviceNames(listenHost: "0.0.0.0")
        #expect(names.contains("127.0.0.1") && names.contains("localhost") && !names.contains("0.0.0.0"))
        var buffer = [CChar](repeating: 0, count: 256)
        gethostname(&buffer, 255)
        let host = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).lowercased()
        #expect(names.contains(host) && names.contains(host.split(separator: ".")[0] + ".local"))
        #expect(PairingRequestGuard.deviceNames(listenHost: "10.9.8.7").contains("10.9.8.7"))
    }

    // MARK: sessions and their rate limits

    @Test func aPeerStartsAtMostOneSessionPer2SecondsAnd10AMinute() {
        var sessions = PairingSessions<ManualClock.Instant, Int>()
        var started = 0
        var refusedWaits: [Duration] = []
        // A script asking every 100 ms for 5 minutes.
        for tick in 0..<3000 {
            let now = ManualClock.Instant(offset: .milliseconds(100 * tick))
            if let wait = sessions.mayStart(peer: "script", at: now) {
                refusedWaits.append(wait)
            } else {
                sessions.start(id: "s\(tick)", peer: "script", value: tick, at: now)
                started += 1
            }
        }
        #expect(started == 50, "10 a minute for 5 minutes")
        #expect(refusedWaits.allSatisfy { $0 > .zero && $0 <= .seconds(60) })
        #expect(sessions.sessions.count == 1)
    }

    @Test func aScriptOnAnotherMachineCannotReplaceThePhonesSession() {
        var sessions = PairingSessions<ManualClock.Instant, Int>()
        #expect(sessions.mayStart(peer: "phone", at: at(0)) == nil)
        sessions.start(id: "phone-1", peer: "phone", value: 1, at: at(0))
        for second in 1..<600 where sessions.mayStart(peer: "script", at: at(second)) == nil {
            sessions.start(id: "script-\(second)", peer: "script", value: 0, at: at(second))
        }
        #expect(sessions.session(id: "phone-1")?.value == 1)
        // The newest session is always valid.
        #expect(sessions.session(id: sessions.sessions.last!.id) != nil)
        // The phone's own new deviceInfo replaces its old session.
        sessions.start(id: "phone-2", peer: "phone", value: 2, at: at(700))
        #expect(sessions.session(id: "phone-1") == nil && sessions.session(id: "phone-2")?.value == 2)
    }

    @Test func theOldestSessionGoesOnlyWhenAsManyOtherAddressesAsitKeepsAskedSince() {
        var sessions = PairingSessions<ManualClock.Instant, Int>(limits: .init(maximumPeers: 4))
        sessions.start(id: "phone", peer: "phone", value: 0, at: at(0))
        // Three other addresses in a loop for ten minutes: the phone's session stays.
        for second in 1..<600 {
            for script in 1...3 where sessions.mayStart(peer: "s\(script)", at: at(second)) == nil {
                sessions.start(id: "s\(script)-\(second)", peer: "s\(script)", value: script, at: at(second))
            }
        }
        #expect(sessions.session(id: "phone") != nil && sessions.sessions.count == 4)
        // A fourth pushes the oldest out.
        sessions.start(id: "s4", peer: "s4", value: 4, at: at(700))
        #expect(sessions.session(id: "phone") == nil && sessions.sessions.count == 4)
    }

    @Test func aFloodFromOtherNetworksReplacesItsOwnSessionsNotThePhones() {
        var sessions = PairingSessions<ManualClock.Instant, Int>(limits: .init(maximumPeers: 16))
        sessions.start(id: "phone", peer: "192.168.1.20", value: 0, at: at(0))
        sessions.start(id: "laptop", peer: "fd00:1:2:3::9", value: 0, at: at(0))
        // 300 one-shot addresses of three other networks, IPv4 and IPv6, in a burst.
        for index in 0..<300 {
            let peer =
                switch index % 3 {
                case 0: "10.0.\(index % 2).\(index / 3 % 250 + 1)"
                case 1: "fd00:1:2:4::\(String(index, radix: 16))"
                default: "::ffff:172.16.0.\(index / 3 % 250 + 1)"
                }
            #expect(sessions.mayStart(peer: peer, at: at(1)) == nil)
            sessions.start(id: "flood-\(index)", peer: peer, value: index, at: at(1))
            // The newest session is always valid.
            #expect(sessions.session(id: "flood-\(index)") != nil)
        }
        #expect(sessions.sessions.count == 16)
        #expect(sessions.session(id: "phone") != nil && sessions.session(id: "laptop") != nil)
        // Another address of the phone's network takes the room of a flooding network, not the phone's.
        sessions.start(id: "tablet", peer: "192.168.1.21", value: 0, at: at(2))
        #expect(sessions.session(id: "phone") != nil && sessions.session(id: "tablet") != nil)
        // With every network down to one session, the oldest goes.
        var lone = PairingSessions<ManualClock.Instant, Int>(limits: .init(maximumPeers: 2))
        lone.start(id: "a", peer: "10.0.1.1", value: 0, at: at(0))
        lone.start(id: "b", peer: "10.0.2.1", value: 0, at: at(1))
        lone.start(id: "c", peer: "10.0.3.1", value: 0, at: at(2))
        #expect(lone.sessions.map(\.id) == ["b", "c"])
    }

    @Test func networksAreIPv4Slash24AndIPv6Slash64() {
        typealias Sessions = PairingSessions<ManualClock.Instant, Int>
        #expect(Sessions.network(of: "192.168.1.20") == "192.168.1.0/24")
        #expect(Sessions.network(of: "::ffff:192.168.1.20") == "192.168.1.0/24")
        #expect(Sessions.network(of: "::ffff:c0a8:0114") == "192.168.1.0/24")
        #expect(Sessions.network(of: "fd00:0:0:1:2:3:4:5") == "fd00:0:0:1::/64")
        #expect(Sessions.network(of: "fd00::1:2:3:4:5") == "fd00:0:0:1::/64")
        #expect(Sessions.network(of: "FE80::1%eth0") == "fe80:0:0:0::/64")
        #expect(Sessions.network(of: "::1") == "0:0:0:0::/64")
        for odd in ["", "local", "1.2.3", "1.2.3.256", "1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", "a.b.c.d"] {
            #expect(Sessions.network(of: odd) == odd)
        }
    }

    // MARK: the coordinator

    func coordinator(_ http: ScriptedHTTPClient) throws -> PairingCoordinator<ManualClock> {
        let lwa = LWAClient(
            http: http, tokenURL: try EndpointURL("http://127.0.0.1:1/auth/o2/token"), clientSecret: nil)
        let tokens = try TokenManager(
            store: MemoryTokenStore(), lwa: lwa, clock: clock, wallTime: { 1000 }, logger: .init(label: "test"))
        return PairingCoordinator(
            device: .init(serial: "SN1", model: "M1", phase: .test), clientId: "amzn1.application-oa2-client.mine",
            lwa: lwa, tokens: tokens, clock: clock, deviceNames: { Self.names }, logger: .init(label: "test"))
    }

    @Test func anotherClientIdIsInvalidParamAndLWAIsNotCalled() async throws {
        let http = ScriptedHTTPClient { _ in
            json(200, #"{"access_token":"Atza|a","refresh_token":"Atzr|r","expires_in":3600}"#)
        }
        let pairing = try coordinator(http)
        let info = await pairing.handle(PairingTests.request(.GET, "/provision/deviceInfo"))
        let sessionId = try #require(
            (try JSONSerialization.jsonObject(with: Data(info.body)) as? [String: Any])?["sessionId"] as? String)
        func companion(clientId: String) async -> ServerResponse {
            await pairing.handle(
                PairingTests.request(
                    .POST, "/provision/companionInfo",
                    body: #"{"sessionId":"\#(sessionId)","authCode":"c","clientId":"\#(clientId)","redirectUri":"r"}"#))
        }
        let wrong = await companion(clientId: "amzn1.application-oa2-client.someone-else")
        #expect(wrong.status == 400 && String(decoding: wrong.body, as: UTF8.self).contains("INVALID_PARAM"))
        #expect(http.requests.isEmpty)
        let right = await companion(clientId: "amzn1.application-oa2-client.mine")
        #expect(right.status == 204 && http.requests.count == 1)
    }

    @Test func guardedRequestsNeverReachTheEndpointsAndDeviceInfoIsRateLimited() async throws {
        let http = ScriptedHTTPClient { (_) throws(AgentError) -> HTTPResponse in
            throw AgentError(.network, "must not be called")
        }
        let pairing = try coordinator(http)
        let rebound = await pairing.handle(
            PairingTests.request(.GET, "/provision/deviceInfo", headers: [("Host", "attacker.example:8642")]))
        #expect(rebound.status == 421 && String(decoding: rebound.body, as: UTF8.self).contains("INVALID_PARAM"))
        let first = await pairing.handle(PairingTests.request(.GET, "/provision/deviceInfo"))
        #expect(first.status == 200)
        let second = await pairing.handle(PairingTests.request(.GET, "/provision/deviceInfo"))
        #expect(second.status == 429 && second.headers.contains { $0 == ("Retry-After", "2") })
        // Another peer is not held back by the first one's limit.
        let other = await pairing.handle(PairingTests.request(.GET, "/provision/deviceInfo", peer: "192.168.1.8"))
        #expect(other.status == 200)
        clock.advance(by: .seconds(2))
        #expect(await pairing.handle(PairingTests.request(.GET, "/provision/deviceInfo")).status == 200)
        #expect(http.requests.isEmpty)
    }

    @Test func anAddressThatCameLaterIsLearnedOnAMissAtMostEvery5Seconds() async throws {
        let names = Mutex<Set<String>>(["localhost"])
        let reads = Mutex(0)
        let lwa = LWAClient(
            http: ScriptedHTTPClient { _ in json(500, "{}") },
            tokenURL: try EndpointURL("http://127.0.0.1:1/auth/o2/token"), clientSecret: nil)
        let tokens = try TokenManager(
            store: MemoryTokenStore(), lwa: lwa, clock: clock, wallTime: { 1000 }, logger: .init(label: "test"))
        let pairing = PairingCoordinator(
            device: .init(serial: "SN1", model: "M1", phase: .test), clientId: "c", lwa: lwa, tokens: tokens,
            clock: clock,
            deviceNames: {
                reads.withLock { $0 += 1 }
                return names.withLock { $0 }
            }, logger: .init(label: "test"))
        let probe = {
            await pairing.handle(PairingTests.request(.GET, "/", headers: [("Host", "192.168.1.20")])).status
        }
        #expect(await probe() == 421)
        #expect(reads.withLock { $0 } == 1, "just read: a miss does not read again")
        // DHCP gives the address; within 5 s of the last look the miss is not looked up again.
        _ = names.withLock { $0.insert("192.168.1.20") }
        clock.advance(by: .seconds(4))
        #expect(await probe() == 421)
        #expect(await probe() == 421)
        #expect(reads.withLock { $0 } == 1)
        clock.advance(by: .seconds(1))
        #expect(await probe() == 404, "served (no such endpoint) once the address is known")
        #expect(reads.withLock { $0 } == 2)
    }

    // MARK: connections

    @Test func aFullServerEvictsSlowThenClosingThenFreshConnectionsOfTheBusiestPeer() {
        typealias C = ConnectionAdmission.Connection
        func decide(_ peer: String, _ open: [C]) -> ConnectionAdmission.Decision {
            ConnectionAdmission.decide(peer: peer, open: open, maximum: 4, maximumPerPeer: 2)
        }
        #expect(decide("a", []) == .admit)
        // A peer at its own cap makes room among its own.
        let own = [C(id: 1, peer: "a", state: .answering), C(id: 2, peer: "a", state: .fresh)]
        #expect(decide("a", own) == .admitEvicting(2))
        #expect(decide("b", own) == .admit)
        #expect(decide("a", own.map { C(id: $0.id, peer: $0.peer, state: .answering) }) == .refuse)
        // Full: the busiest peer gives way; slow before closing before fresh, oldest first within each.
        var full = [
            C(id: 1, peer: "good", state: .fresh), C(id: 2, peer: "bad", state: .fresh),
            C(id: 3, peer: "bad", state: .lingering), C(id: 4, peer: "bad", state: .slow),
        ]
        #expect(decide("new", full) == .admitEvicting(4))
        full[3].state = .answering
        #expect(decide("new", full) == .admitEvicting(3))
        full[2].state = .answering
        #expect(decide("new", full) == .admitEvicting(2))
        full[1].state = .answering
        #expect(decide("new", full) == .refuse, "the good peer holds fewer: it is not the one to give way")
        // Peers holding one each: anyone's slow connection goes before a fresh one.
        let spread = [
            C(id: 1, peer: "a", state: .fresh), C(id: 2, peer: "b", state: .lingering),
            C(id: 3, peer: "c", state: .slow), C(id: 4, peer: "d", state: .slow),
        ]
        #expect(decide("e", spread) == .admitEvicting(3))
    }
}
