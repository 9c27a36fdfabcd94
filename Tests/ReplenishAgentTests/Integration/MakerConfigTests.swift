import Foundation
import Testing

@testable import ReplenishAgent

/// A device maker's first day with the real binary (issue #22): `check-config` refuses the shipped example with
/// one line per placeholder and accepts it filled in; a unit's serial comes from a per-unit file, and `status`
/// and `check-config` say so; `run` refuses a config problem with exit 78 (no restart under systemd).
@Suite(.serialized, .onOwnThread, .tags(.process)) struct MakerConfigTests {
    @Test func checkConfigRefusesTheShippedExampleWithOneLinePerPlaceholder() throws {
        let harness = Harness()
        let result = try harness.run(
            "replenish-agent", ["check-config", "--config", packageRoot() + "/config/agent.example.json"])
        #expect(result.status == 1)
        let lines = result.error.split(separator: "\n").map(String.init)
        #expect(
            ConfigTests.placeholderLines(lines)
                == Dictionary(uniqueKeysWithValues: ConfigTests.placeholderKeys.map { ($0, 1) }), "\(result.error)")
        #expect(!result.error.contains("REPLACE-WITH-YOUR-LWA-CLIENT-SECRET"), "the secret's text is never printed")
        #expect(!result.output.contains("config OK"))
    }

    @Test func checkConfigAcceptsTheExampleFilledIn() throws {
        let harness = Harness()
        let path = harness.directory + "/agent.json"
        let text = try ConfigTests.filledInExample(directory: harness.directory)
            .replacingOccurrences(of: "/var/lib/replenish-agent", with: harness.directory + "/state")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        // It holds lwa.clientSecret: only its owner may read it.
        #expect(chmod(path, 0o600) == 0)
        let result = try harness.run("replenish-agent", ["check-config", "--config", path])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.output.contains("config OK: \(path)"))
        #expect(result.output.contains("serial SN12345 from device.serial in the config"), "\(result.output)")
    }

    /// One image for every unit: the serial in a file the factory writes, shown by `check-config` and `status`.
    @Test func aSerialFromTheFactorysFileIsShownByStatusAndCheckConfig() throws {
        let harness = Harness()
        let written = try harness.writeConfig(emulator: "http://127.0.0.1:9", pairingPort: try FreePorts.take())
        let text = try String(contentsOfFile: written, encoding: .utf8)
            .replacingOccurrences(of: #""serial":"TEST0001""#, with: #""serialFile":"serial""#)
        try text.write(toFile: written, atomically: true, encoding: .utf8)
        let serialFile = harness.directory + "/serial"
        try "UNIT0042\n".write(toFile: serialFile, atomically: true, encoding: .utf8)

        let check = try harness.run("replenish-agent", ["check-config", "--config", written])
        #expect(check.status == 0, "\(check.error)")
        #expect(check.output.contains("serial UNIT0042 from device.serialFile \(serialFile)"), "\(check.output)")

        let status = try harness.statusJSON(config: written)
        #expect(status["serial"] as? String == "UNIT0042")
        #expect(status["serialSource"] as? String == "file")
        #expect(status["serialFile"] as? String == serialFile)
        let human = try harness.run("replenish-agent", ["status", "--config", written])
        #expect(human.output.contains("device UNIT0042 "), "\(human.output)")
        #expect(human.output.contains("serial from device.serialFile \(serialFile)"), "\(human.output)")

        // A bad serial: check-config names the key and the file; run refuses with the configuration's exit 78.
        try "UNIT-42\n".write(toFile: serialFile, atomically: true, encoding: .utf8)
        let bad = try harness.run("replenish-agent", ["check-config", "--config", written])
        #expect(bad.status == 1)
        #expect(bad.error.contains("device.serialFile: \(serialFile) holds \"UNIT-42\", not a serial"), "\(bad.error)")
        try FileManager.default.removeItem(atPath: serialFile)
        let run = try harness.run("replenish-agent", ["run", "--config", written], timeout: 30)
        #expect(run.status == RunCommand.configurationExitCode, "\(run.error)")
        #expect(run.error.contains("device.serialFile: no such file \(serialFile)"), "\(run.error)")
    }

    /// `run` on the untouched example refuses to start with the same lines as `check-config`, exit 78.
    @Test func runRefusesTheShippedExample() throws {
        let harness = Harness()
        let config = packageRoot() + "/config/agent.example.json"
        let run = try harness.run("replenish-agent", ["run", "--config", config], timeout: 30)
        #expect(run.status == RunCommand.configurationExitCode)
        let check = try harness.run("replenish-agent", ["check-config", "--config", config])
        let placeholders = { (text: String) in
            text.split(separator: "\n").filter { $0.contains("still the example's placeholder") }
        }
        #expect(placeholders(run.error) == placeholders(check.error) && placeholders(run.error).count == 5)
    }
}
