import Foundation
import Testing

@testable import ReplenishAgent

/// A relay between the phone and the device (issue 50, items 1 and 2): a host the companion reaches instead of
/// the device (found by DNS-SD or a spoofed address) passes `deviceInfo` on to the real device and its answer
/// back, proof intact, with one field changed (`Fixtures/relay.py`). With version 1 of the proofs the method and
/// the phase flags were outside the proof: a relay that turned the method to `plain` got the customer's code
/// bound to a challenge it knew, and one that flipped `isTestDevice` turned a device's every order into a test
/// order. Version 2 covers them; both companions refuse, and the customer's code never reaches LWA.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct RelayTests {
    static let clientId = "amzn1.application-oa2-client.emulator"

    /// An emulator, an unpaired agent with a setup key, and a relay in front of its pairing port.
    func startRelay(_ change: [String], consentPage: Bool = false) throws
        -> (harness: Harness, emulator: String, relay: String, config: String)
    {
        let harness = Harness()
        let (emulator, port, config, _) = try harness.startUnpairedAgent(
            emulatorArguments: consentPage ? ["--consent-page"] : [])
        let relayPort = try FreePorts.take()
        try harness.start(
            "/usr/bin/python3",
            [
                packageRoot() + "/Tests/ReplenishAgentTests/Fixtures/relay.py", "\(relayPort)",
                "http://127.0.0.1:\(port)", harness.directory + "/relayed.log",
            ] + change, log: "relay.log")
        let relay = "http://127.0.0.1:\(relayPort)"
        try harness.waitUntil("the relay") {
            (try? CurlEasy(options: .init()).perform(HTTPRequest(method: .get, url: relay + "/"))) != nil
        }
        return (harness, emulator, relay, config)
    }

    /// `replenish-companion` with the label, pointed at the relay; it gives up on the customer's consent after 5 s.
    static func benchCompanion(_ harness: Harness, relay: String, emulator: String, payload: String) throws
        -> Harness.Finished
    {
        try harness.run(
            "replenish-companion",
            [
                "--setup", payload, "--client-id", clientId, "--device", relay, "--authorize-url", emulator + "/ap/oa",
                "--redirect-port", "\(try FreePorts.take())", "--timeout", "5",
            ], timeout: 30)
    }

    @Test func aRelayThatTurnsTheMethodToPlainGetsNoConsentAndNoCode() throws {
        let (harness, emulator, relay, config) = try startRelay(["--plain"], consentPage: true)
        let payload = try #require(harness.setupPayload)
        // The bench companion: refused before the customer is asked anything (no authorize URL printed).
        let bench = try Self.benchCompanion(harness, relay: relay, emulator: emulator, payload: payload)
        #expect(bench.status == 1, "\(bench.output) \(bench.error)")
        #expect(bench.error.contains("codeChallengeMethod is plain, not S256"), "\(bench.error)")
        #expect(!bench.output.contains("consent at:"), "\(bench.output)")
        // The emulator's reference client: the same refusal.
        let reference = try harness.run(
            "replenish-emulator", ["companion", "--device", relay, "--lwa", emulator, "--setup", payload])
        #expect(reference.status == 1, "\(reference.output) \(reference.error)")
        #expect(reference.error.contains("codeChallengeMethod is plain, not S256"), "\(reference.error)")
        // The relay saw the changed answers; no code went to LWA or through the relay, and the device is still
        // unpaired and pairable.
        #expect(harness.read("relayed.log").contains("changed=method"), "\(harness.read("relayed.log"))")
        #expect(!harness.read("relayed.log").contains("companionInfo"))
        #expect(try harness.stats(emulator)["tokenRequests"] as? Int == 0)
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == false)
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func aRelayThatFlipsAPhaseFlagBreaksTheProofAndAFaithfulOnePairs() throws {
        let (harness, emulator, relay, config) = try startRelay(["--flip-test"])
        let payload = try #require(harness.setupPayload)
        let flipped = try harness.run(
            "replenish-emulator", ["companion", "--device", relay, "--lwa", emulator, "--setup", payload])
        #expect(flipped.status == 1, "\(flipped.output) \(flipped.error)")
        #expect(flipped.error.contains("did not prove it holds the label's setup key"), "\(flipped.error)")
        let bench = try Self.benchCompanion(harness, relay: relay, emulator: emulator, payload: payload)
        #expect(bench.status == 1, "\(bench.output) \(bench.error)")
        #expect(bench.error.contains("did not prove it holds the label's setup key"), "\(bench.error)")
        #expect(!bench.output.contains("consent at:"), "\(bench.output)")
        #expect(harness.read("relayed.log").contains("changed=isTestDevice"))
        #expect(try harness.stats(emulator)["tokenRequests"] as? Int == 0)
        #expect(try harness.statusJSON(config: config)["paired"] as? Bool == false)

        // A relay that changes nothing is a router: the proofs check out through it, and PKCE keeps the code
        // useless to it (only the device holds the verifier).
        let faithful = try startRelay([])
        let paired = try faithful.harness.run(
            "replenish-emulator",
            [
                "companion", "--device", faithful.relay, "--lwa", faithful.emulator, "--setup",
                try #require(faithful.harness.setupPayload),
            ])
        #expect(paired.status == 0, "\(paired.error)")
        try faithful.harness.waitUntil("paired") {
            try faithful.harness.statusJSON(config: faithful.config)["paired"] as? Bool == true
        }
        harness.expectNoSecretsInAgentOutput()
        faithful.harness.expectNoSecretsInAgentOutput()
    }
}
