import Foundation
import Testing

@testable import ReplenishAgent

/// The factory line and the label (issue 51, points 3 and 4): the ready-to-box step scans the printed label and
/// `label --check` fails when it is not this unit's; `make-setup-key --rotate` replaces the key of an unpaired
/// unit only; a label typed in by hand carries a check group, so `replenish-companion` says "mistyped" before it
/// asks any device, and "not the device on the label" only for a well-formed key the device cannot prove.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct FactoryLineTests {
    @Test func theReadyToBoxCheckFailsOnAnotherUnitsLabel() throws {
        let harness = Harness()
        let config = try harness.writeConfig(emulator: "http://127.0.0.1:1", pairingPort: 1, setupKey: true)
        let key = try #require(harness.setupKey)
        let printed = try harness.run("replenish-agent", ["label", "--config", config])
        let matches = try harness.run("replenish-agent", ["label", "--config", config, "--check", printed.output])
        #expect(matches.status == 0 && matches.output == "label matches this unit (serial TEST0001)\n", "\(matches)")
        var generator = SystemRandomNumberGenerator()
        let otherKey = SetupKey(using: &generator)
        let wrong: [(String, String)] = [
            (LabelPayload(serial: "TEST0002", key: key).text, "its serial is TEST0002, this unit's is TEST0001"),
            (LabelPayload(serial: "TEST0001", key: otherKey).text, "this unit's serial TEST0001 but another setup key"),
            ("not a label", "not a label's payload"),
            (LabelPayload(serial: "TEST0001", key: key).manualEntryKey, "not a label's payload"),
        ]
        for (scanned, reason) in wrong {
            let refused = try harness.run("replenish-agent", ["label", "--config", config, "--check", scanned])
            #expect(refused.status == 1 && refused.error.contains(reason), "\(refused.error)")
            let shown = refused.error.contains(key.hex) || refused.error.contains(otherKey.hex)
            #expect(!shown, "a key was printed")
        }
    }

    @Test(.enabled(if: geteuid() == 0, "needs root to give the key to another uid"))
    func aKeyIsRotatedOnlyOnAnUnpairedUnit() throws {
        let harness = Harness()
        let emulator = try harness.startEmulator(["--slots", "slot-1"])
        let port = try FreePorts.take()
        let config = try harness.writeConfig(emulator: emulator, pairingPort: port, setupKey: true)
        let keyFile = harness.directory + "/setup-key"
        func key() throws -> String { try String(contentsOfFile: keyFile, encoding: .utf8) }
        let first = try key()
        // Unpaired: replaced, mode 600, still the agent's user's (here uid 65534), and the label follows the key.
        #expect(chown(keyFile, 65534, 65534) == 0)
        let rotated = try harness.run("replenish-agent", ["make-setup-key", "--rotate", "--config", config, keyFile])
        #expect(rotated.status == 0 && rotated.output.contains("restart the agent"), "\(rotated.error)")
        let second = try key()
        let changed = second != first && SetupKey(fileContents: Array(second.utf8)) != nil
        #expect(changed)
        #expect(try POSIX.status(keyFile)?.octalPermissions == "600")
        #expect(try POSIX.status(keyFile)?.owner == 65534, "the rotated key keeps its owner")
        #expect(chown(keyFile, geteuid(), getegid()) == 0)
        let label = try harness.run("replenish-agent", ["label", "--config", config])
        let labelFollows = label.output.hasSuffix(":" + second)
        #expect(labelFollows)
        // Without --rotate: never over a key.
        let refused = try harness.run("replenish-agent", ["make-setup-key", keyFile])
        #expect(refused.status == 1 && refused.error.contains("exists"))

        // Paired: refused with the reason, the key kept.
        try harness.startAgent(config: config)
        try harness.waitUntil("the pairing endpoints") { Harness.pairingPortAnswers(port) }
        let newLabel = LabelPayload(serial: "TEST0001", key: try #require(SetupKey(fileContents: Array(second.utf8))))
        let pairing = try harness.run(
            "replenish-emulator",
            ["companion", "--device", "http://127.0.0.1:\(port)", "--lwa", emulator, "--setup", newLabel.text])
        #expect(pairing.status == 0, "\(pairing.error)")
        try harness.waitUntil("paired") { try harness.statusJSON(config: config)["paired"] as? Bool == true }
        let paired = try harness.run("replenish-agent", ["make-setup-key", "--rotate", "--config", config, keyFile])
        #expect(paired.status == 1 && paired.error.contains("the unit is paired"), "\(paired.error)")
        let kept = try key() == second
        #expect(kept)
        let printed = (rotated.output + rotated.error + paired.output + paired.error).contains(second.prefix(32))
        #expect(!printed, "a key was printed")
        harness.expectNoSecretsInAgentOutput()
    }

    @Test func aTypedLabelWithATypoIsMistypedBeforeAnyDeviceIsAsked() throws {
        let harness = Harness()
        let (emulator, port, _, _) = try harness.startUnpairedAgent(emulatorArguments: ["--consent-page"])
        let typed = LabelPayload(serial: "TEST0001", key: try #require(harness.setupKey)).manualEntryKey
        func companion(serial: String, key: String) throws -> Harness.Finished {
            try harness.run(
                "replenish-companion",
                [
                    "--serial", serial, "--key", key, "--client-id", "amzn1.application-oa2-client.emulator",
                    "--device", "http://127.0.0.1:\(port)", "--authorize-url", emulator + "/ap/oa",
                    "--redirect-port", "\(try FreePorts.take())", "--timeout", "2",
                ], timeout: 30)
        }
        // One digit off (in the key, then in the serial): a typo, said before any device is asked.
        var digits = Array(typed)
        digits[5] = digits[5] == "0" ? "1" : "0"
        for (serial, key) in [("TEST0001", String(digits)), ("TEST0002", typed)] {
            let mistyped = try companion(serial: serial, key: key)
            #expect(mistyped.status == 1 && mistyped.error.contains("mistyped"), "\(mistyped.error)")
        }
        #expect(!harness.agentLogs.contains("pairing session started"), "a device was asked")
        // Another unit's label, typed without a typo: the device cannot prove it, so it is not this device.
        var generator = SystemRandomNumberGenerator()
        let other = LabelPayload(serial: "TEST0001", key: SetupKey(using: &generator)).manualEntryKey
        let notThis = try companion(
            serial: "TEST0001", key: other.uppercased().replacingOccurrences(of: "-", with: " "))
        #expect(notThis.status == 1 && notThis.error.contains("not the device on the label"), "\(notThis.error)")
        #expect(!notThis.error.contains("mistyped"))
        // The right label: the device proves the key (the customer's consent is not given here).
        let right = try companion(serial: "TEST0001", key: typed)
        #expect(
            right.output.contains("device TEST0001 (model model-1) at http://127.0.0.1:\(port) proved the label's key"))
        harness.expectNoSecretsInAgentOutput()
    }
}
