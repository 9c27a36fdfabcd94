import Foundation
import Logging
import NIOHTTP1
import Synchronization
import Testing

@testable import ReplenishAgent

/// Setup mode against a fake NetworkManager on a manual clock: `NetworkSetupKeeper` running the machine's actions,
/// and the setup endpoints (`ProvisioningEndpoints`) under the label's proofs (docs/wifi-setup.md).
@Suite(.tags(.unit)) struct ProvisioningTests {
    /// NetworkManager as the keeper sees it: what it was asked, and changes the test sends.
    final class FakeNetworkManager: NetworkManagerControl {
        struct State {
            var start: Result<(online: Bool, savedWiFi: Bool), NetworkManagerUnavailable> = .success((false, false))
            var accessPoint: (ssid: String, passphrase: String)?
            /// The channel of each opening of the access point.
            var channels: [Int] = []
            var opened = 0
            var joins: [String] = []
            var scans = 0
            var cancelledJoins = 0
            var reconnects = 0
        }
        let state = Mutex(State())
        let (stream, continuation) = AsyncStream.makeStream(of: NetworkManagerChange.self)

        func start() async throws -> (online: Bool, savedWiFi: Bool) { try state.withLock { $0.start }.get() }
        func changes() -> AsyncStream<NetworkManagerChange> { stream }
        func openAccessPoint(ssid: String, passphrase: String, channel: Int) async throws {
            state.withLock {
                $0.accessPoint = (ssid, passphrase)
                $0.channels.append(channel)
                $0.opened += 1
            }
        }
        func closeAccessPoint() async { state.withLock { $0.accessPoint = nil } }
        func networks() async throws -> [VisibleNetwork] {
            state.withLock { $0.scans += 1 }
            return [
                .init(ssid: "Home Net", signal: 80, security: .wpa, channel: 6),
                .init(ssid: "Cafe", signal: 30, security: .open, channel: 11),
            ]
        }
        func join(ssid: String, passphrase: String?, hidden: Bool) async throws {
            state.withLock { $0.joins.append(ssid) }
        }
        func cancelJoin() async { state.withLock { $0.cancelledJoins += 1 } }
        func reconnectSaved() async throws -> Bool {
            state.withLock { $0.reconnects += 1 }
            return true
        }
        var isOpen: Bool { state.withLock { $0.accessPoint != nil } }
    }

    let key = SetupKey(hex: "000102030405060708090a0b0c0d0e0f")!
    let clock = ManualClock()
    let fake = FakeNetworkManager()
    let lines = CapturedLogs()

    func keeper(reopenAfterFailedJoin: Bool = false) -> NetworkSetupKeeper<ManualClock> {
        NetworkSetupKeeper(
            control: fake, accessPoint: SetupAccessPoint(serial: "SN0001", key: key), clock: clock,
            logger: lines.logger,
            reopenAfterFailedJoin: reopenAfterFailedJoin)
    }

    func endpoints(_ keeper: NetworkSetupKeeper<ManualClock>) -> ProvisioningEndpoints<ManualClock> {
        ProvisioningEndpoints(key: key, setup: keeper, clock: clock, logger: lines.logger)
    }

    /// Yields until `condition` holds (at most 100,000 times): the keeper runs on other tasks.
    func until(_ condition: () async -> Bool) async {
        var spins = 0
        while spins < 100_000, !(await condition()) {
            spins += 1
            await Task.yield()
        }
    }

    func request(_ method: HTTPMethod, _ path: String, query: String? = nil, body: String = "") -> ServerRequest {
        ServerRequest(method: method, path: path, body: Array(body.utf8), peer: "10.42.0.2", query: query)
    }

    static let nonce = "00112233445566778899aabbccddeeff"

    struct Networks: Decodable {
        struct Network: Decodable { var ssid: String, signal: Int, security: String }
        var sessionId: String, networks: [Network], proof: String
    }

    /// `GET /provision/networks` with the phone's proof; the answer's proof checked.
    func listNetworks(_ endpoints: ProvisioningEndpoints<ManualClock>) async throws -> Networks {
        let proof = key.proof(of: SetupAccessPoint.networksRequestMessage(nonce: Self.nonce))
        let response = try #require(
            await endpoints.handle(request(.GET, "/provision/networks", query: "nonce=\(Self.nonce)&proof=\(proof)")))
        #expect(response.status == 200)
        let answer = try JSONDecoder().decode(Networks.self, from: Data(response.body))
        let listed = answer.networks.map {
            VisibleNetwork(ssid: $0.ssid, signal: $0.signal, security: .init(rawValue: $0.security)!)
        }
        #expect(
            key.accepts(
                answer.proof,
                of: SetupAccessPoint.networksAnswerMessage(
                    nonce: Self.nonce, sessionId: answer.sessionId, networks: listed)))
        return answer
    }

    func postNetwork(
        _ endpoints: ProvisioningEndpoints<ManualClock>, session: String, ssid: String = "Home Net",
        passphrase: String, proof: String? = nil
    ) async throws -> ServerResponse {
        let proof =
            proof
            ?? key.proof(
                of: SetupAccessPoint.networkRequestMessage(
                    sessionId: session, ssid: ssid, passphrase: passphrase, hidden: false))
        let body =
            #"{"sessionId":"\#(session)","ssid":"\#(ssid)","passphrase":"\#(passphrase)","hidden":false,"proof":"\#(proof)"}"#
        return try #require(await endpoints.handle(request(.POST, "/provision/network", body: body)))
    }

    /// `GET /provision/network`: the state the phone shows, its proof checked.
    func readState(_ endpoints: ProvisioningEndpoints<ManualClock>, session: String) async throws -> String {
        let proof = key.proof(of: SetupAccessPoint.stateRequestMessage(sessionId: session, nonce: Self.nonce))
        let response = try #require(
            await endpoints.handle(
                request(.GET, "/provision/network", query: "sessionId=\(session)&nonce=\(Self.nonce)&proof=\(proof)")))
        let answer = try JSONDecoder().decode([String: String].self, from: Data(response.body))
        let state = answer["state"] ?? "(\(response.status): \(answer["message"] ?? ""))"
        guard response.status == 200 else { return state }
        #expect(
            key.accepts(
                answer["proof"] ?? "",
                of: SetupAccessPoint.stateAnswerMessage(
                    sessionId: session, nonce: Self.nonce, state: state, ssid: answer["ssid"] ?? "")))
        return state
    }

    @Test func aNewUnitOpensTheLabelsAccessPointThirtySecondsAfterStart() async {
        let keeper = keeper()
        let running = Task { await keeper.run() }
        defer { running.cancel() }
        await until { clock.sleeperCount == 1 }
        clock.advance(by: .seconds(29))
        await until { fake.isOpen }
        #expect(!fake.isOpen)
        clock.advance(by: .seconds(1))
        await until { fake.isOpen }
        let accessPoint = SetupAccessPoint(serial: "SN0001", key: key)
        #expect(
            fake.state.withLock {
                $0.accessPoint?.ssid == "Replenish-91cb" && $0.accessPoint?.passphrase == accessPoint.passphrase.value
            })
    }

    @Test func thePhoneHandsOverTheHomeNetworkAndReadsEachStateOfTheJoin() async throws {
        let keeper = keeper()
        let endpoints = endpoints(keeper)
        let running = Task { await keeper.run() }
        defer { running.cancel() }
        await until { clock.sleeperCount == 1 }
        #expect(await keeper.longPress(), "no connectivity: the long press opens setup mode")
        #expect(fake.isOpen)
        let listed = try await listNetworks(endpoints)
        #expect(listed.networks.map(\.ssid) == ["Home Net", "Cafe"])
        #expect(try await readState(endpoints, session: listed.sessionId) == "idle")
        #expect(try await postNetwork(endpoints, session: listed.sessionId, passphrase: "wrong horse").status == 202)
        #expect(fake.state.withLock { $0.joins } == ["Home Net"])
        #expect(try await readState(endpoints, session: listed.sessionId) == "joining")
        fake.continuation.yield(.joinFailed(.wrongPassphrase))
        await until { (try? await readState(endpoints, session: listed.sessionId)) == "failed:wrong-passphrase" }
        #expect(try await readState(endpoints, session: listed.sessionId) == "failed:wrong-passphrase")
        #expect(fake.isOpen, "the access point stays up, so the phone hears of the wrong passphrase")
        #expect(try await postNetwork(endpoints, session: listed.sessionId, passphrase: "correct horse").status == 202)
        fake.continuation.yield(.joinSucceeded)
        await until { (try? await readState(endpoints, session: listed.sessionId)) != "joining" }
        #expect(try await readState(endpoints, session: listed.sessionId) == "joined", "read again: still joined")
        #expect(fake.isOpen, "the answer that carries joined goes out over the access point")
        await until { clock.sleeperCount == 1 }
        clock.advance(by: .seconds(5))
        await until { !fake.isOpen }
        #expect(!fake.isOpen, "read joined: the access point closes 5 s later")
        #expect(await keeper.phase == .online)
        let logged = lines.text
        #expect(
            !logged.contains("horse") && !logged.contains(SetupAccessPoint(serial: "SN0001", key: key).passphrase.value)
        )
        #expect(logged.contains("setup mode: could not join the network") && logged.contains("wrong-passphrase"))
    }

    /// A radio holds one channel at a time (mac80211_hwsim as a Raspberry Pi's): the access point opens on the
    /// strongest network's channel, and moves to the chosen network's before the join.
    @Test func theAccessPointOpensOnTheStrongestNetworksChannelAndMovesToTheChosenOnes() async throws {
        let keeper = keeper()
        let endpoints = endpoints(keeper)
        let running = Task { await keeper.run() }
        defer { running.cancel() }
        await until { clock.sleeperCount == 1 }
        #expect(await keeper.longPress())
        #expect(fake.state.withLock { $0.channels } == [6], "Home Net, the strongest, is on channel 6")
        let listed = try await listNetworks(endpoints)
        #expect(
            try await postNetwork(endpoints, session: listed.sessionId, ssid: "Cafe", passphrase: "correct horse")
                .status == 202)
        #expect(fake.state.withLock { $0.channels } == [6, 11], "moved to Cafe's channel before the join")
        #expect(fake.state.withLock { $0.joins } == ["Cafe"])
    }

    /// With the access point and the join on one interface, NetworkManager takes the access point down for the
    /// join: a failed join opens it again, so the phone can come back and read why.
    @Test func onOneInterfaceAFailedJoinOpensTheAccessPointAgain() async throws {
        let keeper = keeper(reopenAfterFailedJoin: true)
        let endpoints = endpoints(keeper)
        let running = Task { await keeper.run() }
        defer { running.cancel() }
        await until { clock.sleeperCount == 1 }
        #expect(await keeper.longPress())
        let listed = try await listNetworks(endpoints)
        #expect(try await postNetwork(endpoints, session: listed.sessionId, passphrase: "wrong horse").status == 202)
        #expect(fake.state.withLock { $0.opened } == 1)
        fake.continuation.yield(.joinFailed(.wrongPassphrase))
        await until { fake.state.withLock { $0.opened } == 2 }
        #expect(fake.state.withLock { $0.opened } == 2, "opened again after the failed join")
        #expect(try await readState(endpoints, session: listed.sessionId) == "failed:wrong-passphrase")
    }

    /// Offline with a saved network, the keeper asks NetworkManager every 30 s to join it again (its own
    /// autoconnect may have given up), and stops once the unit is back on its network.
    @Test func offlineWithASavedNetworkTheKeeperAsksForItEvery30SecondsUntilBackOnline() async throws {
        fake.state.withLock { $0.start = .success((online: false, savedWiFi: true)) }
        let keeper = keeper()
        let running = Task { await keeper.run() }
        defer { running.cancel() }
        await until { clock.sleeperCount == 1 }
        clock.advance(by: .seconds(29))
        await until { clock.sleeperCount == 1 }
        #expect(fake.state.withLock { $0.reconnects } == 0)
        clock.advance(by: .seconds(1))
        await until { fake.state.withLock { $0.reconnects } == 1 }
        await until { clock.sleeperCount == 1 }
        clock.advance(by: .seconds(30))
        await until { fake.state.withLock { $0.reconnects } == 2 }
        #expect(fake.state.withLock { $0.reconnects } == 2)
        #expect(lines.text.contains("Wi-Fi: asked NetworkManager to join the saved network again"))
        fake.continuation.yield(.connectivity(online: true))
        await until { await keeper.phase == .online }
        clock.advance(by: .seconds(600))
        for _ in 0..<1000 { await Task.yield() }
        #expect(fake.state.withLock { $0.reconnects } == 2, "back online: nothing more to ask")
        #expect(!fake.isOpen)
    }

    @Test func aWrongOrMissingProofChangesNothing() async throws {
        let keeper = keeper()
        let endpoints = endpoints(keeper)
        let running = Task { await keeper.run() }
        defer { running.cancel() }
        await until { clock.sleeperCount == 1 }
        _ = await keeper.longPress()
        // (the opening scanned once, for the access point's channel)
        let scansBefore = fake.state.withLock { $0.scans }
        let bad = String(repeating: "0", count: 64)
        let scan = try #require(
            await endpoints.handle(request(.GET, "/provision/networks", query: "nonce=\(Self.nonce)&proof=\(bad)")))
        #expect(scan.status == 403 && fake.state.withLock { $0.scans } == scansBefore)
        let session = try await listNetworks(endpoints).sessionId
        #expect(
            try await postNetwork(endpoints, session: session, passphrase: "correct horse", proof: bad).status == 403)
        // A relay that changes the passphrase under the phone's proof.
        let phones = key.proof(
            of: SetupAccessPoint.networkRequestMessage(
                sessionId: session, ssid: "Home Net", passphrase: "correct horse", hidden: false))
        #expect(
            try await postNetwork(endpoints, session: session, passphrase: "relay's horse", proof: phones).status == 403
        )
        #expect(fake.state.withLock { $0.joins }.isEmpty)
        #expect(try await readState(endpoints, session: session) == "idle")
        // Wrong proofs are limited per address: beyond the burst, 429 before the proof is checked.
        var statuses: [Int] = []
        for _ in 0..<10 {
            statuses.append(
                try await postNetwork(endpoints, session: session, passphrase: "correct horse", proof: bad).status)
        }
        #expect(statuses.last == 429)
    }

    @Test func theSetupEndpointsAnswer404WhileSetupIsClosedAndNilForOtherPaths() async throws {
        fake.state.withLock { $0.start = .success((online: true, savedWiFi: true)) }
        let keeper = keeper()
        let endpoints = endpoints(keeper)
        let running = Task { await keeper.run() }
        defer { running.cancel() }
        await until { await keeper.phase == .online }
        #expect(await endpoints.handle(request(.GET, "/provision/networks"))?.status == 404)
        #expect(await endpoints.handle(request(.GET, "/provision/deviceInfo")) == nil)
        #expect(!(await keeper.longPress()), "with connectivity a long press is re-pairing's")
    }

    @Test func withoutNetworkManagerSetupIsUnavailableAndTheAgentRunsAsBefore() async {
        fake.state.withLock { $0.start = .failure(.init(reason: "NetworkManager is not running")) }
        let keeper = keeper()
        let running = Task { await keeper.run() }
        defer { running.cancel() }
        await until { await keeper.phase == .unavailable(reason: "NetworkManager is not running") }
        #expect(await keeper.phase == .unavailable(reason: "NetworkManager is not running"))
        #expect(!(await keeper.longPress()))
        #expect(clock.sleeperCount == 0 && fake.state.withLock { $0.opened } == 0)
    }

    @Test func credentialsThatNoNetworkCouldHaveAreRefusedBeforeTheProof() {
        typealias Endpoints = ProvisioningEndpoints<ManualClock>
        #expect(Endpoints.problem(ssid: "", passphrase: nil) != nil)
        #expect(Endpoints.problem(ssid: String(repeating: "a", count: 33), passphrase: nil) != nil)
        #expect(Endpoints.problem(ssid: "Home", passphrase: "short") != nil)
        #expect(Endpoints.problem(ssid: "Home", passphrase: "new\nline!") != nil)
        #expect(Endpoints.problem(ssid: "Home", passphrase: String(repeating: "a", count: 64)) == nil, "a raw key")
        #expect(Endpoints.problem(ssid: "Home", passphrase: String(repeating: "z", count: 64)) != nil)
        #expect(Endpoints.problem(ssid: "Home", passphrase: "correct horse") == nil)
    }
}
