import Testing

@testable import ReplenishAgent

/// `NetworkSetup` as a pure value on manual instants: when the setup access point opens and closes, a join's
/// states as the phone reads them, and the faults of issue 52's point 4 that the device decides (docs/wifi-setup.md).
@Suite(.tags(.unit)) struct NetworkSetupTests {
    typealias Setup = NetworkSetup<ManualClock.Instant>

    func at(_ seconds: Int) -> ManualClock.Instant { ManualClock.Instant(offset: .seconds(seconds)) }

    /// A setup after `started` at 0 s.
    func setup(online: Bool, savedWiFi: Bool) -> Setup {
        var setup = Setup(now: at(0))
        _ = setup.handle(.started(online: online, savedWiFi: savedWiFi), at: at(0))
        return setup
    }

    /// Ticks every second from `from` to `to` (inclusive); the actions in order.
    func ticks(_ setup: inout Setup, from: Int, to: Int) -> [Setup.Action] {
        (from...to).flatMap { second -> [Setup.Action] in
            if case .actions(let actions) = setup.handle(.tick, at: at(second)) { return actions }
            return []
        }
    }

    @Test func aNewUnitWithNoNetworkOpensTheAccessPointAfterThirtySeconds() {
        var setup = setup(online: false, savedWiFi: false)
        #expect(ticks(&setup, from: 1, to: 29).isEmpty && !setup.isOpen)
        #expect(ticks(&setup, from: 30, to: 30) == [.openAccessPoint] && setup.isOpen)
    }

    @Test func aHomeNetworkDownForAMinuteNeverOpensIt() {
        var setup = setup(online: true, savedWiFi: true)
        _ = setup.handle(.connectivity(online: false), at: at(100))
        #expect(ticks(&setup, from: 100, to: 160) == [.reconnectSaved, .reconnectSaved], "asked at 130 s and 160 s")
        _ = setup.handle(.connectivity(online: true), at: at(160))
        #expect(setup.phase == .online && setup.deadline == nil && setup.nextReconnect == nil)
        // Down again later: the five minutes count from the new outage, not the first.
        _ = setup.handle(.connectivity(online: false), at: at(1000))
        #expect(ticks(&setup, from: 1000, to: 1299) == Array(repeating: .reconnectSaved, count: 9))
        #expect(ticks(&setup, from: 1300, to: 1300) == [.openAccessPoint], "opening wins over a reconnect due then")
    }

    @Test func itOpensByItselfOncePerOutageAndALongPressOpensItAgain() {
        var setup = setup(online: false, savedWiFi: true)
        #expect(ticks(&setup, from: 1, to: 300).filter { $0 != .reconnectSaved } == [.openAccessPoint])
        #expect(ticks(&setup, from: 301, to: 1200) == [.closeAccessPoint], "closed 15 min later, not opened again")
        #expect(ticks(&setup, from: 1201, to: 5000).allSatisfy { $0 == .reconnectSaved })
        #expect(setup.handle(.longPress, at: at(5001)) == .actions([.openAccessPoint]))
    }

    /// NetworkManager may stop trying the saved network on its own (a 4-way handshake that timed out under load is
    /// taken for a wrong key; with no secret agent it blocks the connection): the unit asks it again every 30 s
    /// while it is offline with a saved network, before the access point opens and after it closed unused, and
    /// never while the access point is up or without a saved network.
    @Test func offlineWithASavedNetworkItAsksNetworkManagerToJoinItAgainEvery30Seconds() {
        var setup = setup(online: false, savedWiFi: true)
        #expect(setup.nextReconnect == at(30) && setup.deadline == at(30))
        #expect(ticks(&setup, from: 1, to: 299) == Array(repeating: .reconnectSaved, count: 9))
        #expect(setup.nextReconnect == at(300))
        #expect(ticks(&setup, from: 300, to: 300) == [.openAccessPoint])
        #expect(setup.nextReconnect == nil, "the access point holds the radio")
        #expect(ticks(&setup, from: 301, to: 1199).isEmpty)
        #expect(ticks(&setup, from: 1200, to: 1200) == [.closeAccessPoint])
        #expect(setup.nextReconnect == at(1230), "closed unused: the saved network is tried again")
        #expect(ticks(&setup, from: 1201, to: 1380) == Array(repeating: .reconnectSaved, count: 6))
        _ = setup.handle(.savedWiFi(false), at: at(1390))
        #expect(setup.nextReconnect == nil && setup.deadline == nil)
        #expect(ticks(&setup, from: 1391, to: 3000).isEmpty, "no saved network: nothing to ask")
        _ = setup.handle(.savedWiFi(true), at: at(3000))
        #expect(setup.nextReconnect == at(3030))

        var fresh = self.setup(online: false, savedWiFi: false)
        #expect(fresh.nextReconnect == nil)
        #expect(ticks(&fresh, from: 1, to: 30) == [.openAccessPoint], "a new unit has nothing to join again")
    }

    @Test func aLongPressIsSetupsOnlyWithoutConnectivity() {
        var online = setup(online: true, savedWiFi: true)
        #expect(online.handle(.longPress, at: at(5)) == .notMine, "re-pairing keeps the long press")
        var offline = setup(online: false, savedWiFi: true)
        #expect(offline.handle(.longPress, at: at(5)) == .actions([.openAccessPoint]))
        #expect(offline.handle(.longPress, at: at(6)) == .actions([.closeAccessPoint]), "a long press closes it")
        #expect(!offline.isOpen)
    }

    @Test func theAccessPointStaysUpThroughAWrongPassphraseAndClosesOnceThePhoneReadsJoined() {
        var setup = setup(online: false, savedWiFi: false)
        _ = ticks(&setup, from: 1, to: 30)
        #expect(setup.handle(.credentials(ssid: "Home"), at: at(40)) == .actions([.join(ssid: "Home")]))
        #expect(setup.isOpen)
        #expect(setup.handle(.credentials(ssid: "Other"), at: at(41)) == .refused("a join is under way"))
        #expect(setup.handle(.joinFailed(.wrongPassphrase), at: at(50)) == .actions([]))
        #expect(setup.isOpen && setup.phase == .setup(since: at(50), join: .failed(ssid: "Home", .wrongPassphrase)))
        #expect(setup.deadline == at(50 + 900), "a failed join starts the 15 minutes again")
        #expect(setup.handle(.credentials(ssid: "Home"), at: at(60)) == .actions([.join(ssid: "Home")]))
        #expect(setup.handle(.joinSucceeded, at: at(70)) == .actions([]) && setup.isOpen, "up until the phone reads it")
        // The phone's read is answered over the access point: it closes 5 s later, not under the answer.
        #expect(setup.handle(.joinedRead, at: at(72)) == .actions([]) && setup.isOpen)
        #expect(setup.deadline == at(77))
        #expect(setup.handle(.joinedRead, at: at(73)) == .actions([]), "a read again (its answer lost) reads joined")
        #expect(setup.deadline == at(77), "the first read counts")
        #expect(ticks(&setup, from: 73, to: 76).isEmpty && setup.isOpen)
        #expect(ticks(&setup, from: 77, to: 77) == [.closeAccessPoint])
        #expect(setup.phase == .online)
    }

    @Test func aJoinedThatThePhoneNeverReadsClosesTheAccessPointAfterThirtySeconds() {
        var setup = setup(online: false, savedWiFi: false)
        _ = setup.handle(.longPress, at: at(1))
        _ = setup.handle(.credentials(ssid: "Home"), at: at(2))
        _ = setup.handle(.connectivity(online: true), at: at(10))
        #expect(setup.phase == .setup(since: at(10), join: .joined(ssid: "Home", at: at(10))))
        #expect(ticks(&setup, from: 11, to: 39).isEmpty)
        #expect(ticks(&setup, from: 40, to: 40) == [.closeAccessPoint] && setup.phase == .online)
    }

    @Test func aJoinThatHangsFailsAsTimedOutAndIsCancelled() {
        var setup = setup(online: false, savedWiFi: false)
        _ = setup.handle(.longPress, at: at(1))
        _ = setup.handle(.credentials(ssid: "Home"), at: at(2))
        #expect(ticks(&setup, from: 3, to: 91).isEmpty)
        #expect(ticks(&setup, from: 92, to: 92) == [.cancelJoin] && setup.isOpen)
        #expect(setup.phase == .setup(since: at(92), join: .failed(ssid: "Home", .timedOut)))
    }

    @Test func closingDuringAJoinCancelsIt() {
        var setup = setup(online: false, savedWiFi: false)
        _ = setup.handle(.longPress, at: at(1))
        _ = setup.handle(.credentials(ssid: "Home"), at: at(2))
        #expect(setup.handle(.longPress, at: at(3)) == .actions([.cancelJoin, .closeAccessPoint]))
    }

    @Test func credentialsWhileClosedChangeNothing() {
        var setup = setup(online: true, savedWiFi: true)
        let before = setup
        #expect(setup.handle(.credentials(ssid: "Home"), at: at(1)) == .refused("setup mode is closed"))
        #expect(setup == before)
    }

    @Test func aSavedNetworkThatComesBackClosesTheAccessPoint() {
        var setup = setup(online: false, savedWiFi: true)
        _ = ticks(&setup, from: 1, to: 300)
        #expect(setup.handle(.connectivity(online: true), at: at(400)) == .actions([.closeAccessPoint]))
        #expect(setup.phase == .online)
    }

    @Test func withoutNetworkManagerTheUnitRunsAsBefore() {
        var setup = setup(online: false, savedWiFi: false)
        _ = setup.handle(.longPress, at: at(1))
        #expect(
            setup.handle(.networkManagerGone(reason: "NetworkManager is not running"), at: at(2))
                == .actions([.closeAccessPoint]))
        #expect(setup.phase == .unavailable(reason: "NetworkManager is not running"))
        #expect(setup.handle(.longPress, at: at(3)) == .notMine)
        #expect(ticks(&setup, from: 4, to: 2000).isEmpty && setup.deadline == nil)
    }

    @Test func joinAnswersOutsideAJoinAreIgnored() {
        var setup = setup(online: false, savedWiFi: false)
        _ = setup.handle(.longPress, at: at(1))
        let open = setup
        for event: Setup.Event in [.joinSucceeded, .joinFailed(.dropped), .joinedRead] {
            #expect(setup.handle(event, at: at(2)) == .actions([]))
        }
        #expect(setup == open)
    }

    // MARK: The access point's name, passphrase and proofs (docs/wifi-setup.md's test vector)

    @Test func theDocumentedWiFiVectorIsWhatTheDeviceComputes() throws {
        let vector = try SetupKeyTests.documentedBlock(in: "docs/wifi-setup.md")
        func field(_ name: String) -> String { vector[name] ?? "(missing \(name))" }
        let key = try #require(SetupKey(hex: field("key")))
        let accessPoint = SetupAccessPoint(serial: field("serial"), key: key)
        #expect(accessPoint.ssid == field("ssid"))
        #expect(accessPoint.passphrase.value == field("passphrase"))
        #expect("\(accessPoint.passphrase)" == "<redacted>")
        let network = SetupAccessPoint.networkRequestMessage(
            sessionId: field("sessionId"), ssid: field("home ssid"), passphrase: field("home passphrase"),
            hidden: false)
        #expect(key.proof(of: network) == field("network proof"))
        // A relay that changes the passphrase, the network or the hidden flag breaks the proof.
        for relayed in [
            SetupAccessPoint.networkRequestMessage(
                sessionId: field("sessionId"), ssid: field("home ssid"), passphrase: "other", hidden: false),
            SetupAccessPoint.networkRequestMessage(
                sessionId: field("sessionId"), ssid: "Evil", passphrase: field("home passphrase"), hidden: false),
            SetupAccessPoint.networkRequestMessage(
                sessionId: field("sessionId"), ssid: field("home ssid"), passphrase: field("home passphrase"),
                hidden: true),
            SetupAccessPoint.networkRequestMessage(
                sessionId: field("sessionId"), ssid: field("home ssid"), passphrase: nil, hidden: false),
        ] {
            #expect(!key.accepts(field("network proof"), of: relayed))
        }
        // Another unit's passphrase is another.
        #expect(SetupAccessPoint(serial: "SN0002", key: key).passphrase != accessPoint.passphrase)
    }

    /// A join's end as NetworkManager reports it (its active connection's state, its device's reason): a visible
    /// network "not found" is tried once more as a hidden one; that try timing out is "not found" too.
    @Test func aJoinsEndingFromNetworkManagersStateAndReason() {
        let join = NetworkManagerJoin(active: "/a/1", profile: "/p/1", retry: (Array("Home".utf8), "pass"))
        #expect(join.ending(state: 1, reason: 0) == nil)
        #expect(join.ending(state: 2, reason: 0) == .succeeded)
        #expect(join.ending(state: 4, reason: 7) == .failed(.wrongPassphrase))
        #expect(join.ending(state: 4, reason: 53) == .retryAsHidden(ssid: Array("Home".utf8), passphrase: "pass"))
        #expect(join.ending(state: 4, reason: 11) == .failed(.timedOut))
        let retried = NetworkManagerJoin(active: "/a/2", profile: "/p/2", retried: true)
        #expect(retried.ending(state: 4, reason: 53) == .failed(.notFound))
        #expect(retried.ending(state: 3, reason: 11) == .failed(.notFound))
        #expect(retried.ending(state: 4, reason: 16) == .failed(.noDHCP))
        let hidden = NetworkManagerJoin(active: "/a/3", profile: "")
        #expect(hidden.ending(state: 4, reason: 53) == .failed(.notFound))
    }
}
