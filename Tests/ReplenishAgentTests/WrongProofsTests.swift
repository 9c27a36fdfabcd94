import Testing

@testable import ReplenishAgent

/// `WrongProofs` on a manual clock: how many wrong `companionInfo` proofs an address and a session take, the
/// wait a `429` names, and the log lines as counts (issue 50, item 7).
@Suite(.tags(.unit)) struct WrongProofsTests {
    typealias Proofs = WrongProofs<ManualClock.Instant>

    func at(_ milliseconds: Int) -> ManualClock.Instant { ManualClock.Instant(offset: .milliseconds(milliseconds)) }

    @Test func anAddressMaySendTenWrongProofsAtOnceThenOneEveryTwoSeconds() {
        var proofs = Proofs()
        var checked = 0
        var waits: [Duration] = []
        // A script sending a wrong proof of its own session every 10 ms for 60 s.
        for tick in 0..<6000 {
            let now = at(10 * tick)
            if let wait = proofs.wait(peer: "script", session: "s", owner: "script", at: now) {
                waits.append(wait)
            } else {
                checked += 1
                _ = proofs.wrong(peer: "script", session: "s", owner: "script", at: now)
            }
        }
        #expect(checked == 10 + 29, "the burst, then one every 2 s")
        #expect(!waits.isEmpty && waits.allSatisfy { $0 > .zero && $0 <= .seconds(2) })
    }

    @Test func aCustomerWhoMistypedTheLabelWaitsAtMostTwoSecondsForTheRightProof() {
        var proofs = Proofs()
        for typo in 0..<3 {
            #expect(proofs.wait(peer: "phone", session: "s", owner: "phone", at: at(typo)) == nil)
            _ = proofs.wrong(peer: "phone", session: "s", owner: "phone", at: at(typo))
        }
        #expect(proofs.wait(peer: "phone", session: "s", owner: "phone", at: at(5)) == nil, "a few typos: at once")
        // Typing wrong keys as fast as the device lets it for a minute (a 429 is not counted as a wrong proof):
        // the right one is never more than 2 s away, and the wait a 429 names is enough.
        var refused = 0
        for tick in 1..<600 {
            let now = at(100 * tick)
            if let wait = proofs.wait(peer: "phone", session: "s", owner: "phone", at: now) {
                refused += 1
                #expect(wait <= .seconds(2))
                #expect(proofs.wait(peer: "phone", session: "s", owner: "phone", at: now.advanced(by: wait)) == nil)
            } else {
                _ = proofs.wrong(peer: "phone", session: "s", owner: "phone", at: now)
            }
        }
        #expect(refused > 0)
    }

    @Test func anAttackerAtAnotherAddressCannotLockOutThePhoneNorUseUpItsSession() {
        var proofs = Proofs()
        var checked = 0
        // For 10 s, wrong proofs every millisecond for the phone's session (its id seen on the network) and
        // for the attacker's own.
        for tick in 0..<10_000 {
            let now = at(tick)
            for (session, owner) in [("phone-session", "phone"), ("attacker-session", "attacker")]
            where proofs.wait(peer: "attacker", session: session, owner: owner, at: now) == nil {
                checked += 1
                _ = proofs.wrong(peer: "attacker", session: session, owner: owner, at: now)
            }
            #expect(proofs.wait(peer: "phone", session: "phone-session", owner: "phone", at: now) == nil)
        }
        #expect(checked == 10 + 4, "its burst, then one every 2 s: \(checked)")
    }

    @Test func manyAddressesTogetherGetTheBurstOfTheSessionTheyDidNotStart() {
        var proofs = Proofs()
        var checked = 0
        for address in 0..<500 {
            let peer = "10.0.\(address / 256).\(address % 256)"
            if proofs.wait(peer: peer, session: "phone-session", owner: "phone", at: at(address)) == nil {
                checked += 1
                _ = proofs.wrong(peer: peer, session: "phone-session", owner: "phone", at: at(address))
            }
        }
        #expect(checked == 10)
        #expect(proofs.wait(peer: "phone", session: "phone-session", owner: "phone", at: at(500)) == nil)
    }

    @Test func theTrackedAddressesAreBoundedAndTheBusiestIsForgottenLast() {
        var proofs = Proofs(limits: .init(maximumTracked: 8))
        for typo in 0..<10 { _ = proofs.wrong(peer: "script", session: "s", owner: "script", at: at(typo)) }
        #expect(proofs.wait(peer: "script", session: "s", owner: "script", at: at(10)) != nil)
        for address in 0..<1000 {
            let peer = "peer-\(address)"
            #expect(proofs.wait(peer: peer, session: peer, owner: peer, at: at(10 + address)) == nil)
            _ = proofs.wrong(peer: peer, session: peer, owner: peer, at: at(10 + address))
            #expect(proofs.trackedCount <= 2 * 8)
        }
        #expect(proofs.wait(peer: "script", session: "s", owner: "script", at: at(1010)) != nil)
    }

    @Test func wrongProofsAreLoggedAsOneCountPerWindowNeverOnePerRequest() {
        var proofs = Proofs()
        var reports: [Proofs.Report] = []
        // A flood from three addresses, 1 ms apart, for 35 s; then quiet; then one typo.
        for tick in 0..<35_000 {
            let now = at(tick)
            let peer = ["10.0.0.7", "10.0.0.7", "10.0.0.8", "10.0.0.9"][tick % 4]
            if proofs.wait(peer: peer, session: "s", owner: peer, at: now) == nil {
                if let report = proofs.wrong(peer: peer, session: "s", owner: peer, at: now) { reports.append(report) }
            } else if let report = proofs.throttled(peer: peer, at: now) {
                reports.append(report)
            }
        }
        #expect(reports.count == 4, "the first at once, then one per 10 s window: \(reports)")
        #expect(reports.first?.wrongProofs == 1 && reports.first?.busiestPeer == "10.0.0.7")
        #expect(reports.dropFirst().allSatisfy { $0.peers == 3 && $0.busiestPeer == "10.0.0.7" })
        let counted = reports.map { $0.wrongProofs + $0.throttled }.reduce(0, +)
        let last = proofs.due(at: at(60_000))
        #expect(counted + (last.map { $0.wrongProofs + $0.throttled } ?? 0) == 35_000, "every try counted once")
        #expect(proofs.due(at: at(60_001)) == nil)
        let typo = proofs.wrong(peer: "phone", session: "p", owner: "phone", at: at(90_000))
        #expect(typo?.wrongProofs == 1 && typo?.busiestPeer == "phone", "after a quiet spell: at once")
        #expect(proofs.due(at: at(90_001), force: true) == nil, "nothing more to say")
    }
}
