import Foundation
import Testing

@testable import ReplenishAgent

/// The proof that a confirmed press ends as exactly one accepted replenish: many presses across three slots
/// with a seeded 30 % fault rate on every LWA and DRS path and random SIGKILLs of the agent. Run by hand with
/// `scripts/soak.sh [PRESSES] [SEED]` (1,000 presses by default); CI runs 200 as part of the tests.
@Suite(.serialized, .onOwnThread, .tags(.process, .soak)) struct SoakTests {
    static let presses = Int(ProcessInfo.processInfo.environment["SOAK_PRESSES"] ?? "") ?? 200
    static let seed = UInt64(ProcessInfo.processInfo.environment["SOAK_SEED"] ?? "") ?? 20_261_122

    struct Episode {
        var slot: String
        var startSeq: Int
        var endSeq: Int = .max
        var delivered = false
    }

    @Test func pressesAreNeverLostNorDuplicatedUnderFaultsAndKills() throws {
        let harness = Harness()
        let slots = ["slot-1", "slot-2", "slot-3"]
        let inputs = ["slot-1": "button", "slot-2": "button2", "slot-3": "button3"]
        var (emulator, config, agent, _) = try harness.startPairedAgent(
            emulatorArguments: ["--access-token-lifetime", "20", "--rotate-refresh-tokens"], slots: slots)
        _ = try harness.emulator(
            emulator, .post, "/admin/fault-rate",
            body: """
                {"rate":0.3,"seed":\(Self.seed),"paths":["/replenish","/auth/o2/token","/deviceStatus","/subscriptionInfo"],
                 "kinds":["status500","status503","drop","dropAfterWork","garbage"]}
                """)
        var random = RandomSource.seeded(state: Self.seed)
        var started = 0
        var refusedPresses = 0
        var episodes: [Episode] = []
        var active: [String: Int] = [:]  // slot → index in episodes
        // Each SIGKILL happened somewhere between `sent` (just before kill(2)) and `dead` (the process seen gone).
        var kills: [(sent: Double, dead: Double)] = []
        let deadline = Date().addingTimeInterval(Double(Self.presses) * 3 + 300)
        func lastSeq() throws -> Int { (try harness.replenishEvents(emulator).last?["seq"] as? Int) ?? 0 }

        while (started < Self.presses || !active.isEmpty) && Date() < deadline {
            for slot in slots where active[slot] == nil && started < Self.presses {
                let startSeq = try lastSeq()
                let press = try harness.run(
                    "replenish-agent", ["press", inputs[slot]!, "--hold", "0.05", "--config", config])
                if press.status == 0 {
                    started += 1
                    episodes.append(Episode(slot: slot, startSeq: startSeq))
                    active[slot] = episodes.count - 1
                } else {
                    refusedPresses += 1  // not confirmed: the customer presses again (no episode starts)
                }
            }
            let status = try harness.statusJSON(config: config)["slots"] as? [String: [String: Any]] ?? [:]
            let events = try harness.replenishEvents(emulator)
            for (slot, index) in active {
                let placed = events.contains {
                    $0["slot"] as? String == slot && ($0["seq"] as? Int ?? 0) > episodes[index].startSeq
                        && $0["outcome"] as? String == "placed"
                }
                guard placed, status[slot]?["pending"] as? Bool == false else { continue }
                episodes[index].endSeq = try lastSeq()
                _ = try harness.emulator(emulator, .post, "/admin/deliver/\(slot)")
                episodes[index].delivered = true
                active[slot] = nil
            }
            // About one SIGKILL every five rounds of presses, at a random moment of the agent's work.
            if Int.random(in: 0..<5, using: &random) == 0 {
                Thread.sleep(forTimeInterval: Double(Int.random(in: 0..<300, using: &random)) / 1000)
                let sent = Date().timeIntervalSince1970
                try harness.kill9(agent)
                kills.append((sent, Date().timeIntervalSince1970))
                agent = try harness.startAgent(config: config)
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        _ = try harness.emulator(emulator, .delete, "/admin/faults")

        // The figures, from the emulator's own log of every replenish call.
        let events = try harness.replenishEvents(emulator)
        var lost = 0
        var duplicated = 0
        var excusedDropped = 0
        var excusedKillWindow = 0
        var accepted = 0
        for episode in episodes {
            let calls = events.filter {
                $0["slot"] as? String == episode.slot && ($0["seq"] as? Int ?? 0) > episode.startSeq
                    && ($0["seq"] as? Int ?? 0) <= episode.endSeq
            }
            let processed = calls.filter { ["placed", "inProgress"].contains($0["outcome"] as? String ?? "") }
            guard episode.delivered, processed.contains(where: { $0["outcome"] as? String == "placed" }) else {
                lost += 1
                continue
            }
            accepted += 1
            for (previous, call) in zip(processed, processed.dropFirst()) {
                _ = call
                if previous["answerDropped"] as? Bool == true {
                    excusedDropped += 1  // the emulator dropped the answer: the agent could not know
                } else if let at = previous["at"] as? Double,
                    // The call reached DRS at most 0.5 s before the kill, or while the kill was under way (the
                    // agent can still send between the test's clock reading and kill(2)).
                    kills.contains(where: { at <= $0.dead && $0.sent - at < 0.5 })
                {
                    excusedKillWindow += 1  // killed between DRS's answer and the outbox write
                } else {
                    duplicated += 1
                }
            }
        }
        let placedOrders = events.filter { $0["outcome"] as? String == "placed" }.count
        let wasted = events.count - accepted
        // Hidden resends: replenish requests the server received for which the agent logged no attempt (libcurl
        // resending on its own would show here), counted per slot over every incarnation's log. A kill between
        // the log line and the send could only hide one, never make one up. Besides, no replenish may travel on
        // a reused connection (that is what lets libcurl resend).
        var hiddenResends = 0
        var loggedAttempts = 0
        for slot in slots {
            let logged = harness.loggedReplenishAttempts(slot: slot)
            loggedAttempts += logged
            hiddenResends += max(0, events.filter { $0["slot"] as? String == slot }.count - logged)
        }
        let onReusedConnections = events.filter { ($0["requestOnConnection"] as? Int ?? 0) != 1 }.count
        let figures =
            "presses \(started), orders placed \(placedOrders), lost \(lost), duplicated \(duplicated), "
            + "hidden resends \(hiddenResends), "
            + "wasted calls \(wasted) (replenish calls \(events.count), attempts the agent logged \(loggedAttempts), "
            + "on a reused connection \(onReusedConnections); resends after a dropped answer \(excusedDropped), "
            + "after a kill between answer and write \(excusedKillWindow); SIGKILLs \(kills.count); "
            + "presses refused while the agent restarted \(refusedPresses); seed \(Self.seed))"
        print("soak: \(figures)")
        try figures.write(
            toFile: harness.directory + "/../replenish-soak-figures.txt", atomically: true, encoding: .utf8)
        #expect(started == Self.presses, "the soak did not finish in time: \(figures)")
        #expect(lost == 0, "\(figures)")
        #expect(duplicated == 0, "\(figures)")
        #expect(hiddenResends == 0, "\(figures)")
        #expect(onReusedConnections == 0, "\(figures)")
        #expect(loggedAttempts >= events.count, "\(figures)")
        #expect(placedOrders == started, "\(figures)")
        harness.expectNoSecretsInAgentOutput()
    }

}

/// A suite of its own so that it runs beside the press soak (each on its own thread) instead of after it.
@Suite(.serialized, .onOwnThread, .tags(.process, .soak)) struct TokenRotationSoakTests {
    static let seed = SoakTests.seed

    @Test func killsDuringTokenRotationNeverCostThePairing() throws {
        let kills = Int(ProcessInfo.processInfo.environment["KILL_COUNT"] ?? "") ?? 200
        let harness = Harness()
        var (emulator, config, agent, _) = try harness.startPairedAgent(
            emulatorArguments: [
                "--access-token-lifetime", "2", "--rotate-refresh-tokens", "--old-refresh-token-policy", "until-used",
            ])
        var random = RandomSource.seeded(state: Self.seed)
        let state = harness.directory + "/state"
        func refreshGrants() throws -> Int {
            (try harness.stats(emulator)["tokenGrants"] as? [String: Int])?["refresh_token"] ?? 0
        }
        // At least `kills` kills, and on until a quarter as many rotations were written (a loaded machine starts
        // the agent more slowly, so fewer of its lives reach a refresh), at most twice as many kills.
        var kill = 0
        while try kill < kills || (kill < 2 * kills && refreshGrants() < kills / 4) {
            defer { kill += 1 }
            Thread.sleep(forTimeInterval: Double(Int.random(in: 0..<800, using: &random)) / 1000)
            try harness.kill9(agent)
            let tokens = try #require(try FileTokenStore.peek(stateDirectory: state), "kill \(kill): no tokens on disk")
            let check = try harness.emulator(
                emulator, .post, "/admin/check-refresh-token",
                body: #"{"refreshToken":"\#(tokens.refreshToken.value)"}"#)
            #expect(check["valid"] as? Bool == true, "kill \(kill): the stored refresh token is no longer accepted")
            agent = try harness.startAgent(config: config)
        }
        let refreshes = try refreshGrants()
        print(
            "kill-during-write: \(kill) SIGKILLs, \(refreshes) refresh grants (rotated each time), pairing kept every time"
        )
        #expect(refreshes >= kills / 4, "tokens did not rotate often enough to test the write window")
        // Still paired and working.
        try harness.waitUntil("paired status") { (try harness.statusJSON(config: config)["paired"] as? Bool) == true }
        // The last restart may still be starting: the press is retried (bounded) until the agent takes it.
        try harness.waitUntil("the restarted agent to take a press") {
            try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0
        }
        try harness.waitUntil("the order") {
            (try harness.slotStatus(config: config, "slot-1")["lastResult"] as? String) == "TEST_ORDER_PLACED"
        }
        harness.expectNoSecretsInAgentOutput()
    }
}
