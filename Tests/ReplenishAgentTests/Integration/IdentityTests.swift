import Foundation
import Testing

@testable import ReplenishAgent

/// Issue #29.4: a pairing is good only for the identity it was made with (serial, model, phase). A unit whose
/// serial file changed, one moved from the test phase to production, or an image cloned from a bench unit must
/// not order on the old pairing: at start its deregistration is queued and the device is pairable again.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct IdentityTests {
    /// The config at `path` with `old` replaced by `new` (the serial or the phase).
    func edit(_ path: String, _ old: String, _ new: String) throws {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains(old))
        try text.replacingOccurrences(of: old, with: new).write(toFile: path, atomically: true, encoding: .utf8)
    }

    @Test(arguments: [
        (#""serial":"TEST0001""#, #""serial":"TEST0002""#, "serial TEST0001 → TEST0002"),
        (#""phase":"test""#, #""phase":"production""#, "phase test → production"),
    ])
    func aChangedIdentityDeregistersTheOldPairingAndPairsAgain(old: String, new: String, change: String) throws {
        let harness = Harness()
        let (emulator, config, agent, pairingPort) = try harness.startPairedAgent()
        try harness.stop(agent)
        // A press queued under the old identity is not ordered under the new one.
        let outboxBefore = try harness.statusJSON(config: config)["pendingOrders"] as? Int
        #expect(outboxBefore == 0)
        try edit(config, old, new)
        // A production unit has a setup key (the companion pairs with its label below).
        if new.contains("production") { try harness.addSetupKey(config: config) }
        let check = try harness.run("replenish-agent", ["check-config", "--before-run", "--config", config])
        #expect(check.status == 0 && check.output.contains("made for another identity (\(change))"), "\(check)")
        _ = try harness.startAgent(config: config)
        try harness.waitUntil("DRS to hear the old pairing's deregistration", timeout: 60) {
            try harness.stats(emulator)["deregistrations"] as? Int == 1
        }
        let status = try harness.statusJSON(config: config)
        #expect(status["paired"] as? Bool == false)
        let reason = status["tokenStateReason"] as? String ?? ""
        #expect(reason.contains("identity changed") && reason.contains(change), "status: \(status)")
        #expect(harness.agentLogs.contains("the pairing was made for another identity"))
        // Pairable again, and the new pairing keeps its identity across a restart.
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        try harness.waitUntil("paired again") { try harness.statusJSON(config: config)["paired"] as? Bool == true }
        try harness.waitUntil("a press accepted") {
            try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0
        }
        try harness.waitUntil("the order") { try harness.statusJSON(config: config)["pendingOrders"] as? Int == 0 }
        #expect(try harness.stats(emulator)["deregistrations"] as? Int == 1)
        harness.expectNoSecretsInAgentOutput()
    }

    /// Only an identity that was read and differs is a change: a token file from before the identity was
    /// recorded keeps its pairing (and records the identity at the start: below).
    @Test func aTokenFileWithoutAnIdentityKeepsItsPairing() throws {
        let harness = Harness()
        let (emulator, config, agent, _) = try harness.startPairedAgent()
        try harness.stop(agent)
        let path = harness.directory + "/state/tokens.json"
        var tokens =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as! [String: Any]
        #expect(tokens["identity"] != nil, "a pairing records its identity")
        tokens["identity"] = nil
        try JSONSerialization.data(withJSONObject: tokens).write(to: URL(fileURLWithPath: path))
        _ = try harness.startAgent(config: config)
        // (Until its control socket is up, `press` says the agent is not running and presses nothing.)
        try harness.waitUntil("a press accepted") {
            try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0
        }
        try harness.waitUntil("the order") { try harness.statusJSON(config: config)["pendingOrders"] as? Int == 0 }
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == true)
        #expect(try harness.stats(emulator)["deregistrations"] as? Int ?? 0 == 0)
    }
}

extension IdentityTests {
    /// #40.7: a token file from a build before the identity record gets this unit's identity at the first start
    /// of this build (no refresh needed: the access token is good for an hour), so an image cloned from it onto
    /// another unit (another serial) is caught at that unit's start instead of ordering on this unit's pairing.
    @Test func aTokenFileWithoutAnIdentityRecordsItAtTheFirstStart() throws {
        let harness = Harness()
        let (emulator, config, agent, _) = try harness.startPairedAgent()
        try harness.stop(agent)
        let path = harness.directory + "/state/tokens.json"
        func stored() throws -> [String: Any] {
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as! [String: Any]
        }
        var tokens = try stored()
        tokens["identity"] = nil
        try JSONSerialization.data(withJSONObject: tokens).write(to: URL(fileURLWithPath: path))
        func refreshes() throws -> Int {
            (try harness.stats(emulator)["tokenGrants"] as? [String: Int])?["refresh_token"] ?? 0
        }
        let refreshesBefore = try refreshes()
        let second = try harness.startAgent(config: config)
        try harness.waitUntil("the identity recorded at the start", timeout: 15) {
            (try stored()["identity"] as? [String: Any])?["serial"] as? String == "TEST0001"
        }
        #expect(try refreshes() == refreshesBefore, "written without a refresh")
        // The line follows the write: the file can be seen before the log has it.
        try harness.waitUntil("the log to say the identity was recorded", timeout: 15) {
            harness.read("agent-2.log").contains("the pairing had no identity recorded")
        }
        try harness.stop(second)
        // The image cloned onto another unit: its serial differs, and its start deregisters the pairing.
        try edit(config, #""serial":"TEST0001""#, #""serial":"TEST0002""#)
        _ = try harness.startAgent(config: config)
        try harness.waitUntil("DRS to hear the old pairing's deregistration", timeout: 60) {
            try harness.stats(emulator)["deregistrations"] as? Int == 1
        }
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == false)
        harness.expectNoSecretsInAgentOutput()
    }

    /// #40.10: a press still queued when the identity changes is not ordered under the new identity, and not
    /// dropped silently either: `orders` lists it as not sent, with the reason, and the log names it.
    @Test func aPressQueuedAtAnIdentityChangeIsRecordedAsNotSent() throws {
        let harness = Harness()
        let (emulator, config, agent, _) = try harness.startPairedAgent()
        try harness.injectFault(emulator, path: "/replenish/slot-1", count: 1000, #"{"kind":"status","status":503}"#)
        #expect(try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0)
        try harness.waitUntil("the press refused once") { harness.loggedReplenishAttempts(slot: "slot-1") >= 1 }
        try harness.stop(agent)
        #expect(try harness.statusJSON(config: config)["pendingOrders"] as? Int == 1)
        try edit(config, #""serial":"TEST0001""#, #""serial":"TEST0002""#)
        _ = try harness.startAgent(config: config)
        try harness.waitUntil("the pairing forgotten") {
            try harness.statusJSON(config: config)["paired"] as? Bool == false
        }
        #expect(try harness.statusJSON(config: config)["pendingOrders"] as? Int == 0)
        let orders = try harness.ordersJSON(config: config)["orders"] as? [[String: Any]] ?? []
        let dropped = orders.first { $0["detailCode"] as? String == "NOT_SENT" }
        #expect(dropped?["slot"] as? String == "slot-1", "orders: \(orders)")
        #expect(
            (dropped?["droppedReason"] as? String)?.contains("identity changed (serial TEST0001 → TEST0002)") == true)
        let text = try harness.run("replenish-agent", ["orders", "--config", config]).output
        #expect(text.contains("slot slot-1: NOT_SENT (a queued press dropped, never sent:"), "\(text)")
        #expect(harness.read("agent-2.log").contains("a queued press was dropped, never sent"))
        harness.expectNoSecretsInAgentOutput()
    }
}

/// Issue #29.5: LWA reads the client secret only on a refresh, so a wrong `lwa.clientSecret` was found at the
/// first scheduled refresh, 55 minutes after pairing. Pairing now refreshes once when a secret is configured:
/// a wrong one fails the pairing (`LWA_ERROR`, naming `invalid_client`) and the device stays pairable.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct ClientSecretTests {
    /// The harness's config with `lwa.clientSecret` set (and the file 0600, as a config holding it must be).
    func withSecret(_ harness: Harness, emulator: String, pairingPort: Int, secret: String) throws -> String {
        let path = try harness.writeConfig(emulator: emulator, pairingPort: pairingPort)
        let text = try String(contentsOfFile: path, encoding: .utf8).replacingOccurrences(
            of: #""clientId":"amzn1.application-oa2-client.emulator""#,
            with: #""clientId":"amzn1.application-oa2-client.emulator","clientSecret":"\#(secret)""#)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        return path
    }

    @Test func aWrongClientSecretFailsThePairingAndTheRightOnePairs() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator(["--slots", "slot-1", "--client-secret", "the-right-secret"])
        let pairingPort = try FreePorts.take()
        var config = try withSecret(harness, emulator: emulator, pairingPort: pairingPort, secret: "a-wrong-secret")
        let agent = try harness.startAgent(config: config)
        try harness.waitUntil("the pairing endpoints") { Harness.pairingPortAnswers(pairingPort) }
        let refused = try harness.run(
            "replenish-emulator",
            ["companion", "--device", "http://127.0.0.1:\(pairingPort)", "--lwa", emulator])
        #expect(refused.status != 0)
        #expect(refused.error.contains("LWA_ERROR") && refused.error.contains("invalid_client"), "\(refused.error)")
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == false)
        #expect(Harness.pairingPortAnswers(pairingPort), "still pairable")
        // The right secret: the same flow pairs, and the refresh made at pairing is the one LWA saw.
        try harness.kill9(agent)
        config = try withSecret(harness, emulator: emulator, pairingPort: pairingPort, secret: "the-right-secret")
        _ = try harness.startAgent(config: config)
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        try harness.waitUntil("paired") { try harness.statusJSON(config: config)["paired"] as? Bool == true }
        harness.expectNoSecretsInAgentOutput()
        #expect(!harness.agentLogs.contains("the-right-secret") && !harness.agentLogs.contains("a-wrong-secret"))
    }
}

/// #40.3: a serial read from a file may be cut short at one start (a slow EEPROM, a partition mounted late). A
/// serial that differs from the pairing's is acted on only once it has read the same for a span no glitch lasts;
/// meanwhile nothing is ordered on the pairing and `status` says why, and a serial that reads right again ends
/// the wait with the pairing kept. A serial in another case is the same device.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct SerialGlitchTests {
    /// A paired agent, stopped, whose config now reads the serial (`TEST0001`) from `serial` in the harness's
    /// folder.
    func pairedWithASerialFile(_ harness: Harness) throws -> (emulator: String, config: String, serialFile: String) {
        let (emulator, config, agent, _) = try harness.startPairedAgent()
        try harness.stop(agent)
        let serialFile = harness.directory + "/serial"
        try "TEST0001\n".write(toFile: serialFile, atomically: true, encoding: .utf8)
        let text = try String(contentsOfFile: config, encoding: .utf8)
        try text.replacingOccurrences(of: #""serial":"TEST0001""#, with: #""serialFile":"serial""#)
            .write(toFile: config, atomically: true, encoding: .utf8)
        return (emulator, config, serialFile)
    }

    @Test func aSerialCutShortAtOneStartHoldsOrdersAndKeepsThePairing() throws {
        let harness = Harness()
        let (emulator, config, serialFile) = try pairedWithASerialFile(harness)
        try "TEST\n".write(toFile: serialFile, atomically: true, encoding: .utf8)
        let agent = try harness.startAgent(config: config)
        try harness.waitUntil("status to say why nothing is ordered") {
            let reason = try harness.statusJSON(config: config)["tokenStateReason"] as? String ?? ""
            return reason.contains("the serial reads TEST,") && reason.contains("nothing is ordered")
        }
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == true)
        try harness.waitUntil("a press accepted") {
            try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0
        }
        #expect(try harness.statusJSON(config: config)["pendingOrders"] as? Int == 1)
        // Nothing leaves while the serial is in doubt (a bounded look: the agent would send within a second).
        let until = Date().addingTimeInterval(3)
        while Date() < until {
            #expect(harness.loggedReplenishAttempts(slot: "slot-1") == 0)
            #expect(try harness.stats(emulator)["deregistrations"] as? Int ?? 0 == 0)
            Thread.sleep(forTimeInterval: 0.2)
        }
        // The whole serial again: the wait ends, the press is ordered once on the pairing it was made under.
        try "TEST0001\n".write(toFile: serialFile, atomically: true, encoding: .utf8)
        try harness.waitUntil("the held press ordered", timeout: 30) {
            try harness.statusJSON(config: config)["pendingOrders"] as? Int == 0
        }
        #expect(harness.loggedReplenishAttempts(slot: "slot-1") == 1)
        #expect(try harness.replenishEvents(emulator).count == 1)
        #expect(try harness.stats(emulator)["deregistrations"] as? Int ?? 0 == 0)
        #expect(try harness.statusJSON(config: config)["tokenState"] as? String == "fresh")
        #expect(harness.read("agent-2.log").contains("the serial reads as the pairing's again"))
        // And a restart with the whole serial uses the pairing at once.
        try harness.stop(agent)
        _ = try harness.startAgent(config: config)
        try harness.waitUntil("the device status sent on the pairing") {
            harness.read("agent-3.log").contains("device status sent")
        }
        #expect(!harness.read("agent-3.log").contains("the serial differs"))
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == true)
        #expect(try harness.stats(emulator)["deregistrations"] as? Int ?? 0 == 0)
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func aSerialInAnotherCaseIsTheSameDevice() throws {
        let harness = Harness()
        let (emulator, config, serialFile) = try pairedWithASerialFile(harness)
        try "test0001\n".write(toFile: serialFile, atomically: true, encoding: .utf8)
        let check = try harness.run("replenish-agent", ["check-config", "--before-run", "--config", config])
        #expect(!check.output.contains("another identity"), "\(check.output)")
        _ = try harness.startAgent(config: config)
        try harness.waitUntil("a press accepted") {
            try harness.run("replenish-agent", ["press", "button", "--config", config]).status == 0
        }
        try harness.waitUntil("the order") { try harness.replenishEvents(emulator).count == 1 }
        #expect(try harness.stats(emulator)["deregistrations"] as? Int ?? 0 == 0)
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == true)
    }
}
