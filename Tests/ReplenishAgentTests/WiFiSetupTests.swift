import Foundation
import Logging
import NIOPosix
import Synchronization
import Testing

@testable import ReplenishAgent

/// The Wi-Fi setup as the daemon runs it (`WiFiSetup`): dormant, with no NetworkManager connection made, while the
/// unit has a default route; woken by a start without one or a long press without one; the setup endpoints served
/// while the access point is open and closed after; what `status` and the LED are told.
@Suite(.tags(.unit)) struct WiFiSetupTests {
    typealias Fake = ProvisioningTests.FakeNetworkManager

    let key = SetupKey(hex: "000102030405060708090a0b0c0d0e0f")!
    let clock = ManualClock()
    let fake = Fake()
    let lines = CapturedLogs()
    /// What the test sets and reads beside the setup.
    final class Facts: Sendable {
        let made = Mutex(0)
        let network = Mutex(true)
        let shown = Mutex<[WiFiSetupShown?]>([])
        let joined = Mutex(0)
    }
    let facts = Facts()

    func setup(port: Int = 0) -> WiFiSetup<ManualClock> {
        WiFiSetup(
            settings: .init(port: port), serial: "SN0001", key: key, clock: clock,
            group: MultiThreadedEventLoopGroup.singleton, logger: lines.logger,
            show: { [facts] state in facts.shown.withLock { $0.append(state) } },
            joined: { [facts] in facts.joined.withLock { $0 += 1 } },
            makeControl: { [fake, facts] in
                facts.made.withLock { $0 += 1 }
                return fake
            }, hasNetwork: { [facts] in facts.network.withLock { $0 } })
    }

    func until(_ condition: () async -> Bool) async {
        var spins = 0
        while spins < 100_000, !(await condition()) {
            spins += 1
            await Task.yield()
        }
    }

    @Test func aUnitWithADefaultRouteNeverConnectsToNetworkManager() async {
        let setup = setup()
        let running = Task { await setup.run() }
        defer { running.cancel() }
        await until { lines.text.contains("dormant") }
        #expect(lines.text.contains("setup mode: dormant (the unit has a default route)"))
        // A long press keeps its meaning (re-pairing) on a unit with a network.
        #expect(await setup.longPress() == nil)
        clock.advance(by: .seconds(3600))
        for _ in 0..<1000 { await Task.yield() }
        #expect(facts.made.withLock { $0 } == 0)
        #expect(fake.state.withLock { $0.opened } == 0)
        #expect(facts.shown.withLock { $0 == [nil] }, "dormant: status shows no earlier run's setup mode")
    }

    @Test func aUnitStartedWithoutANetworkOpensTheAccessPointAfterTheWait() async {
        facts.network.withLock { $0 = false }
        let setup = setup()
        let running = Task { await setup.run() }
        defer { running.cancel() }
        await until { clock.sleeperCount == 1 }
        #expect(facts.made.withLock { $0 } == 1)
        #expect(!fake.isOpen)
        clock.advance(by: .seconds(30))
        await until { fake.isOpen && facts.shown.withLock { $0.last??.isOpen == true } }
        #expect(fake.state.withLock { $0.accessPoint?.ssid } == "Replenish-91cb")
        #expect(facts.shown.withLock { $0.last } == .open(accessPoint: "Replenish-91cb", join: nil))
        #expect(lines.text.contains("setup mode: access point open"))
    }

    @Test func aLongPressWithoutANetworkWakesTheSetupAndOpensAtOnce() async {
        let setup = setup()
        let running = Task { await setup.run() }
        defer { running.cancel() }
        await until { lines.text.contains("dormant") }
        facts.network.withLock { $0 = false }
        #expect(await setup.longPress() == "setup mode: opening access point Replenish-91cb")
        await until { fake.isOpen }
        #expect(fake.isOpen)
        #expect(facts.made.withLock { $0 } == 1)
        // Open: a second long press closes it.
        await until { facts.shown.withLock { $0.last??.isOpen == true } }
        #expect(await setup.longPress() == "setup mode: access point closed")
        #expect(!fake.isOpen)
    }

    @Test func theSetupEndpointsAreServedOnlyWhileTheAccessPointIsOpen() async throws {
        facts.network.withLock { $0 = false }
        let setup = setup()
        let running = Task { await setup.run() }
        defer { running.cancel() }
        await until { clock.sleeperCount == 1 }
        #expect(!lines.text.contains("serving the phone"))
        clock.advance(by: .seconds(30))
        let bound = try await servedPort()
        // Served: a request without a proof is refused as the proofs demand.
        let connection = try RawConnection(port: bound)
        connection.send("GET /provision/networks?nonce=00112233445566778899aabbccddeeff HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(await Self.answer(connection)?.status == 403)
        // A long press closes the access point, and the port with it.
        #expect(await setup.longPress() == "setup mode: access point closed")
        var refused = false
        for _ in 0..<500 where !refused {
            refused = (try? RawConnection(port: bound)) == nil
            if !refused { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(refused)
    }

    /// Joined: the pairing goes on on the home network (the daemon opens an unpaired unit's pairing window).
    @Test func theJoinOfThePhonesNetworkIsToldToThePairingOnce() async throws {
        facts.network.withLock { $0 = false }
        let setup = setup()
        let running = Task { await setup.run() }
        defer { running.cancel() }
        await until { clock.sleeperCount == 1 }
        #expect(await setup.longPress() != nil)
        let port = try await servedPort()
        let nonce = "00112233445566778899aabbccddeeff"
        let proof = key.proof(of: SetupAccessPoint.networksRequestMessage(nonce: nonce))
        let listing = try RawConnection(port: port)
        listing.send("GET /provision/networks?nonce=\(nonce)&proof=\(proof) HTTP/1.1\r\nHost: x\r\n\r\n")
        let listed = try #require(await Self.answer(listing))
        let session = try #require(
            (try JSONSerialization.jsonObject(with: Data(listed.body.utf8)) as? [String: Any])?["sessionId"] as? String)
        let joinProof = key.proof(
            of: SetupAccessPoint.networkRequestMessage(
                sessionId: session, ssid: "Home Net", passphrase: "correct horse", hidden: false))
        let body =
            #"{"sessionId":"\#(session)","ssid":"Home Net","passphrase":"correct horse","hidden":false,"proof":"\#(joinProof)"}"#
        let posting = try RawConnection(port: port)
        posting.send(
            "POST /provision/network HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        )
        #expect(await Self.answer(posting)?.status == 202)
        #expect(facts.joined.withLock { $0 } == 0, "joining: not yet")
        fake.continuation.yield(.joinSucceeded)
        await until { facts.joined.withLock { $0 } == 1 }
        for _ in 0..<1000 { await Task.yield() }
        #expect(facts.joined.withLock { $0 } == 1)
    }

    /// One answer on `connection`, read on a thread of its own: a blocking read on the task pool's few threads
    /// could starve the setup's own tasks, which must run to answer.
    static func answer(_ connection: RawConnection) async -> RawConnection.Answer? {
        // SAFETY: the connection is used by that thread alone until it resumes the continuation.
        struct Handed: @unchecked Sendable { let connection: RawConnection }
        let handed = Handed(connection: connection)
        return await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: handed.connection.receiveAnswers(1, within: 10).answers.first) }
                .start()
        }
    }

    /// The setup endpoints' port, from the log line that says it.
    func servedPort() async throws -> Int {
        var port: Int?
        for _ in 0..<500 where port == nil {
            port = lines.text.split(separator: "\n").first { $0.hasPrefix("setup mode: serving the phone") }
                .flatMap { line in Int(line.filter(\.isNumber)) }
            if port == nil { try await Task.sleep(for: .milliseconds(10)) }
        }
        return try #require(port)
    }

    @Test func withoutNetworkManagerStatusSaysWhyAndTheLongPressKeepsItsMeaning() async {
        facts.network.withLock { $0 = false }
        fake.state.withLock { $0.start = .failure(.init(reason: "NetworkManager is not running")) }
        let setup = setup()
        let running = Task { await setup.run() }
        defer { running.cancel() }
        await until { facts.shown.withLock { !$0.isEmpty } }
        #expect(facts.shown.withLock { $0.last } == .unavailable("NetworkManager is not running"))
        #expect(await setup.longPress() == nil)
        #expect(lines.text.contains("setup mode unavailable"))
    }
}
