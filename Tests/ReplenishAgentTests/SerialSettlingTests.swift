import Synchronization
import Testing

@testable import ReplenishAgent

/// #40.3: a serial read from a file that differs from the pairing's is acted on only once it has read the same for
/// the whole span; a serial that reads right again ends the doubt; one that cannot be read never counts. Meanwhile
/// the token manager hands out no access token and makes no refresh.
@Suite(.tags(.unit)) struct SerialSettlingTests {
    typealias Settling = SerialSettling<ManualClock.Instant>
    let recorded = DeviceIdentity(serial: "UNITA0001", model: "model-1", phase: "production")
    func read(_ serial: String) -> DeviceIdentity {
        DeviceIdentity(serial: serial, model: "model-1", phase: "production")
    }
    func at(_ seconds: Int) -> ManualClock.Instant { ManualClock.Instant(offset: .seconds(seconds)) }

    @Test func aNewSerialIsAChangeOnlyAfterTheWholeSpan() {
        var settling = Settling(recorded: recorded)
        var last: Settling.Verdict?
        for second in stride(from: 0, to: 600, by: 5) {
            last = settling.read(read("UNITB0002"), at: at(second))
            guard case .waiting(let until, let reason) = last else {
                Issue.record("acted on at \(second) s: \(String(describing: last))")
                return
            }
            #expect(until == at(600))
            #expect(
                reason.contains("UNITB0002") && reason.contains("UNITA0001") && reason.contains("nothing is ordered"))
        }
        #expect(settling.read(read("UNITB0002"), at: at(600)) == .changed("serial UNITA0001 → UNITB0002"))
    }

    @Test func aSerialThatReadsRightAgainEndsTheDoubt() {
        var settling = Settling(recorded: recorded)
        guard case .waiting = settling.read(read("UNITA"), at: at(0)) else {
            Issue.record("a cut-short serial was acted on at once")
            return
        }
        #expect(settling.read(read("UNITA0001"), at: at(5)) == .same(read("UNITA0001")))
        // In another case it is the same unit.
        #expect(settling.read(read("unita0001"), at: at(10)) == .same(read("unita0001")))
    }

    @Test func anUnreadableSerialOrAnotherNewOneStartsTheSpanOver() {
        var settling = Settling(recorded: recorded)
        _ = settling.read(read("UNITB0002"), at: at(0))
        guard case .waiting(let until, let reason) = settling.read(nil, problem: "no such file", at: at(590)) else {
            Issue.record("an unreadable serial was acted on")
            return
        }
        #expect(until == at(1190) && reason.contains("no such file"))
        guard case .waiting(let restarted, _) = settling.read(read("UNITB0002"), at: at(595)) else {
            Issue.record("acted on a serial read for 0 s")
            return
        }
        #expect(restarted == at(1195))
        // A third serial starts it over again: only one value read throughout counts.
        guard case .waiting(let third, _) = settling.read(read("UNITC0003"), at: at(1190)) else {
            Issue.record("acted on a serial that had just changed")
            return
        }
        #expect(third == at(1790))
        #expect(settling.read(read("UNITC0003"), at: at(1790)) == .changed("serial UNITA0001 → UNITC0003"))
    }

    @Test func onlyTheSerialInAnotherCaseIsNoChangeOfDevice() {
        #expect(read("unita0001").isSameDevice(as: recorded))
        #expect(!read("UNITA").isSameDevice(as: recorded))
        #expect(read("UNITA").differsOnlyInSerial(from: recorded))
        #expect(!DeviceIdentity(serial: "UNITA0001", model: "model-1", phase: "test").isSameDevice(as: recorded))
        let token = TokenSet(
            clientId: "c", refreshToken: Secret("r"), accessToken: Secret("a"), accessTokenExpiresAt: 0,
            accessTokenLifetime: 3600, identity: recorded)
        #expect(token.identityChange(to: read("unita0001")) == nil)
        #expect(token.identityChange(to: read("UNITA")) == "serial UNITA0001 → UNITA")
    }

    @Test func aHeldPairingHandsOutNoTokenAndMakesNoRefreshUntilReleased() async throws {
        let clock = ManualClock()
        let refreshes = Mutex(0)
        let http = ScriptedHTTPClient { _ in
            refreshes.withLock { $0 += 1 }
            return json(
                200, #"{"access_token":"Atza|a1","refresh_token":"Atzr|r1","token_type":"bearer","expires_in":3600}"#)
        }
        let manager = try TokenManager(
            store: MemoryTokenStore(),
            lwa: LWAClient(
                http: http, tokenURL: try EndpointURL("http://127.0.0.1:1/auth/o2/token"), clientSecret: nil),
            clock: clock, wallTime: clock.wallTime(from: 1_800_000_000), random: .seeded(state: 1),
            identity: recorded, logger: .init(label: "test"))
        // Paired with a token that expired at once: a refresh would be due at the first step.
        try await manager.install(
            .init(grant: TokenGrant(accessToken: Secret("Atza|a0"), refreshToken: Secret("Atzr|r0"), expiresIn: 0)),
            clientId: "client")
        await manager.hold(reason: "the serial reads UNITA")
        #expect(await manager.state == .retryWait(expiresAt: 1_800_000_000, reason: "the serial reads UNITA"))
        let driver = StepDriver(clock: clock, manager.step)
        await driver.pass(.seconds(60))
        #expect(refreshes.withLock { $0 } == 0)
        await #expect(throws: AgentError.self) { try await manager.accessToken() }
        await #expect(throws: AgentError.self) { try await manager.refresh(reason: "test") }
        #expect(refreshes.withLock { $0 } == 0)
        await manager.release(identity: recorded)
        #expect(try await manager.accessToken() == Secret("Atza|a1"))
        #expect(refreshes.withLock { $0 } == 1)
    }
}
