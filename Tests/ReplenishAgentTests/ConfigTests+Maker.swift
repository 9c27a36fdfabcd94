import Foundation
import Testing

@testable import ReplenishAgent

/// A device maker's config (issue #22): placeholders of the example, strict JSON with line and column, a wrong
/// board path, and each unit's own serial.
extension ConfigTests {
    /// The keys of the example that hold placeholders, one problem line each.
    static let placeholderKeys = [
        "device.serial", "device.model", "lwa.clientId", "lwa.clientSecret", "buttons[0].slot",
    ]

    /// The lines naming a value still at a placeholder, by key.
    static func placeholderLines(_ lines: [String]) -> [String: Int] {
        var found: [String: Int] = [:]
        for line in lines where line.contains(": still the example's placeholder") {
            found[String(line.prefix { $0 != ":" }), default: 0] += 1
        }
        return found
    }

    /// The shipped example as a maker would fill it in (the repository's board, a CA file that exists).
    static func filledInExample(directory: String) throws -> String {
        let caFile = directory + "/ca.pem"
        try "not checked here".write(toFile: caFile, atomically: true, encoding: .utf8)
        // A unit's setup key, made at the factory (the example names the installed path).
        let setupKeyFile = directory + "/setup-key"
        try "000102030405060708090a0b0c0d0e0f\n".write(toFile: setupKeyFile, atomically: true, encoding: .utf8)
        chmod(setupKeyFile, 0o600)
        return try String(contentsOfFile: packageRoot() + "/config/agent.example.json", encoding: .utf8)
            .replacingOccurrences(of: "REPLACEWITHUNITSERIAL", with: "SN12345")
            .replacingOccurrences(
                of: "REPLACE-WITH-YOUR-DRS-DEVICE-MODEL-ID", with: "7d3e9f10-5b2a-4c8e-9f01-a1b2c3d4e5f6"
            )
            .replacingOccurrences(
                of: "REPLACE-WITH-YOUR-LWA-CLIENT-ID",
                with: "amzn1.application-oa2-client.4f6e1d2c3b4a59687766554433221100"
            )
            .replacingOccurrences(of: "REPLACE-WITH-YOUR-LWA-CLIENT-SECRET-OR-REMOVE-THIS-KEY", with: "s3cr3t-from-lwa")
            .replacingOccurrences(
                of: "REPLACE-WITH-THE-SLOT-ID-FROM-THE-DRS-CONSOLE", with: "a1c2e3f4-0000-4111-8222-933344445555"
            )
            .replacingOccurrences(
                of: "/usr/share/replenish-agent/board/raspberry-pi-4b.json",
                with: packageRoot() + "/board/raspberry-pi-4b.json"
            )
            .replacingOccurrences(of: "/etc/ssl/certs/ca-certificates.crt", with: caFile)
            .replacingOccurrences(of: "/etc/replenish-agent/setup-key", with: setupKeyFile)
    }

    func parseText(_ text: String, deviceTree: [String] = []) throws -> (AgentConfig?, [String], String) {
        let directory = temporaryDirectory()
        try text.write(toFile: directory + "/agent.json", atomically: true, encoding: .utf8)
        try Self.boardText.write(toFile: directory + "/board.json", atomically: true, encoding: .utf8)
        var problems = Problems()
        let config = AgentConfig.parse(
            path: directory + "/agent.json", problems: &problems, deviceTreeSerialPaths: deviceTree)
        return (config, problems.lines, directory)
    }

    // MARK: placeholders

    /// The untouched example gives exactly one problem per placeholder key, each saying where the real value comes
    /// from, and never the client secret's text.
    @Test func theShippedExampleGivesOneProblemPerPlaceholderKey() throws {
        var problems = Problems()
        let config = AgentConfig.parse(path: packageRoot() + "/config/agent.example.json", problems: &problems)
        #expect(config == nil)
        let found = Self.placeholderLines(problems.lines)
        #expect(found == Dictionary(uniqueKeysWithValues: Self.placeholderKeys.map { ($0, 1) }), "\(problems.lines)")
        // Only the placeholders (and the board and CA paths of a device) are wrong with it.
        let others = problems.lines.filter {
            !$0.contains("still the example's placeholder") && !$0.hasPrefix("board:") && !$0.hasPrefix("tls.caFile:")
                && !$0.hasPrefix("pairing.setupKeyFile:")
        }
        #expect(others == [])
        #expect(!problems.lines.joined().contains("REPLACE-WITH-YOUR-LWA-CLIENT-SECRET"))
        let line = { (key: String) in problems.lines.first { $0.hasPrefix(key + ":") } ?? "" }
        #expect(line("lwa.clientId").contains("Login with Amazon security profile"))
        #expect(line("device.model").contains("Dash Replenishment console"))
        #expect(line("buttons[0].slot").contains("DRS console"))
        #expect(line("device.serial").contains("device.serialFile"))
    }

    @Test func aFilledInExampleHasNoProblems() throws {
        let directory = temporaryDirectory()
        let (config, problems, _) = try parseText(try Self.filledInExample(directory: directory))
        #expect(problems == [])
        #expect(config?.device.phase == .production && config?.device.serialSource == .config)
    }

    /// The example's values from before the marker are placeholders too (an `agent.json` made from an older
    /// package); so is any value with the marker.
    @Test func formerPlaceholdersAndTheMarkerAnywhereAreFlagged() throws {
        let directory = temporaryDirectory()
        let filled = try Self.filledInExample(directory: directory)
        let cases: [(String, String, String)] = [
            ("7d3e9f10-5b2a-4c8e-9f01-a1b2c3d4e5f6", "5f4f1c5e-1234-4abc-9def-0123456789ab", "device.model"),
            (
                "amzn1.application-oa2-client.4f6e1d2c3b4a59687766554433221100",
                "amzn1.application-oa2-client.0123456789abcdef", "lwa.clientId"
            ),
            ("s3cr3t-from-lwa", "only-if-your-security-profile-has-one", "lwa.clientSecret"),
            ("a1c2e3f4-0000-4111-8222-933344445555", "0b4f6c1e-5a2d-4c3b-9e8f-7a6b5c4d3e2f", "buttons[0].slot"),
            ("amzn1.application-oa2-client.4f6e1d2c3b4a59687766554433221100", "amzn1.REPLACE.me", "lwa.clientId"),
            ("SN12345", "SNREPLACE1", "device.serial"),
        ]
        for (real, placeholder, key) in cases {
            let (_, problems, _) = try parseText(filled.replacingOccurrences(of: real, with: placeholder))
            #expect(Self.placeholderLines(problems) == [key: 1], "\(placeholder): \(problems)")
        }
        // The serial the tests and the contract's example use is a real-looking serial, not a placeholder.
        let (_, problems, _) = try parseText(filled.replacingOccurrences(of: "SN12345", with: "SN0001"))
        #expect(problems == [])
    }

    // MARK: strict JSON

    /// A broken file is named with the line and column of its first fault.
    @Test func brokenJSONGivesLineAndColumn() throws {
        let text = "{\n  \"device\": {\n    \"serial\" \"SN1\",\n"
        let (config, problems, directory) = try parseText(text)
        #expect(config == nil)
        #expect(problems == ["\(directory)/agent.json:3:14: '\"' where a : after the key was expected"])
    }

    /// docs/configuration.md ("How the files are checked") calls the format strict JSON: a trailing comma (object or
    /// array) and comments are refused, with where they are; the column counts characters, not bytes.
    @Test func trailingCommasAndCommentsAreRefused() throws {
        let cases: [(String, String)] = [
            ("{\"a\": 1,\n}", "1:8: a comma before }: strict JSON allows no trailing comma (remove it)"),
            ("{\"a\": [1, 2,]}", "1:12: a comma before ]: strict JSON allows no trailing comma (remove it)"),
            ("{\"a\": 1 // note\n}", "1:9: a comment: strict JSON has none (remove it)"),
            ("/* c */ {}", "1:1: a comment: strict JSON has none (remove it)"),
            ("{\"é\": 1,, }", "1:9: ',' where a key in double quotes was expected"),
            ("{'a': 1}", "1:2: a single-quoted key: JSON keys use double quotes"),
            ("{\"a\": 01}", "1:8: a number must not have a leading zero"),
            ("{\"a\": NaN}", "1:7: 'N' where a value was expected"),
            ("{\"a\": 1} {}", "1:10: '{' after the end of the document (one JSON value per file)"),
            ("", "1:1: the file is empty: expected a JSON object"),
            ("{\"a\": \"x\ny\"}", "1:9: a line break inside a string (a closing \" is missing?)"),
            ("{\"a\": \"\\x\"}", "1:8: \\x is not a JSON escape"),
            ("{\"a\": 1", "1:8: the file ends inside an object (a } is missing)"),
        ]
        for (text, expected) in cases {
            let fault = JSONSyntax.check(Array(text.utf8))
            #expect(fault.map { "\($0.line):\($0.column): \($0.message)" } == expected, "\(text)")
        }
        // What strict JSON allows passes: every shipped file, escapes, numbers, nesting, a BOM.
        let valid = [
            #"{"a": [1, -0.5, 2e10, 3E-2, true, false, null, "\u00e9\n\"", {}, []]}"#, " [ ] ", "\u{FEFF}{}",
            #"{"é": "ü", "z": "😀"}"#,
        ]
        for text in valid { #expect(JSONSyntax.check(Array(text.utf8)) == nil, "\(text)") }
        // The same walk finds keys given twice, compared decoded, with their paths (escapes and surrogate pairs
        // joined; keys in different objects are not duplicates).
        let duplicates = [
            #"{"a": 1, "\u0061": 2}"#: ["a"],
            #"{"x": [{"k😀": 1, "k\uD83D\uDE00": 2}, {"k😀": 3}]}"#: ["x[0].k😀"],
            #"{"d": {"s": 1, "t": 2, "s": 3}, "s": 4}"#: ["d.s"],
            #"{"a": {"b": 1}, "b": 2}"#: [],
        ]
        for (text, expected) in duplicates {
            #expect(JSONSyntax.inspect(Array(text.utf8)) == .valid(duplicateKeys: expected), "\(text)")
        }
        for file in [
            "config/agent.example.json", "config/simulated.json", "board/simulated.json", "board/raspberry-pi-4b.json",
            "board/raspberry-pi-3b.json", "board/raspberry-pi-5.json", "board/generic-gpiod.json",
        ] {
            let bytes = try #require(try POSIX.readFile(packageRoot() + "/" + file))
            #expect(JSONSyntax.check(bytes) == nil, "\(file)")
        }
        // In the config: a trailing comma is a problem with the file's line and column, not a config.
        var text = Self.configText.replacingOccurrences(of: #""phase":"test"}"#, with: #""phase":"test",}"#)
        let (config, lines, directory) = try parseText(text)
        #expect(config == nil)
        #expect(
            lines == [
                "\(directory)/agent.json:1:58: a comma before }: strict JSON allows no trailing comma (remove it)"
            ])
        // In the board file: the key `board` and the file's position.
        text = Self.configText
        let board = try problems(
            configText: text, boardText: #"{"backend":"simulated","inputs":[{"name":"button"},],"outputs":[]}"#)
        #expect(
            board.lines == [
                "board: \(board.directory)/board.json:1:51: a comma before ]: strict JSON allows no trailing comma (remove it)"
            ])
    }

    // MARK: the board path

    /// A board path that names nothing lists the board files of the folder it names.
    @Test func aWrongBoardPathListsTheBoardFilesThatExist() throws {
        let found = try problems { $0["board"] = "raspberry-pi-9.json" }
        #expect(found.count == 1)
        // The test's folder holds board.json and agent.json (both .json); README-like files are not listed.
        #expect(found.first?.contains("; board files in ") == true)
        #expect(found.first?.hasSuffix(": agent.json, board.json") == true, "\(found)")

        let shipped = try problems { $0["board"] = packageRoot() + "/board/raspberry-pi-4.json" }
        #expect(
            shipped == [
                "board: no board file at \(packageRoot())/board/raspberry-pi-4.json; board files in \(packageRoot())/board: generic-gpiod.json, raspberry-pi-3b.json, raspberry-pi-4b.json, raspberry-pi-5.json, simulated.json"
            ])
        let nowhere = try problems { $0["board"] = "/nonexistent/boards/pi.json" }
        #expect(nowhere == ["board: no board file at /nonexistent/boards/pi.json; no folder /nonexistent/boards"])
    }

    // MARK: each unit's serial

    func serialConfig(_ device: [String: Any]) -> [String: Any] {
        var config = Self.validConfig()
        config["device"] = ["model": "m", "phase": "test"].merging(device) { $1 }
        return config
    }

    /// `device.serialFile`: the factory's per-unit file, relative to the config's folder or absolute, its line break
    /// dropped.
    @Test func aSerialFromASerialFile() throws {
        let directory = temporaryDirectory()
        try "UNIT0042\n".write(toFile: directory + "/serial", atomically: true, encoding: .utf8)
        var problems = Problems()
        for file in ["serial", directory + "/serial"] {
            let config = serialConfig(["serialFile": file])
            try JSONSerialization.data(withJSONObject: Self.simulatedBoard).write(
                to: URL(fileURLWithPath: directory + "/board.json"))
            try JSONSerialization.data(withJSONObject: config).write(
                to: URL(fileURLWithPath: directory + "/agent.json"))
            problems = Problems()
            let loaded = AgentConfig.parse(path: directory + "/agent.json", problems: &problems)
            #expect(problems.lines == [])
            #expect(loaded?.device.serial == "UNIT0042")
            #expect(loaded?.device.serialSource == .file(directory + "/serial"))
            #expect(loaded?.device.serialSource.describe == "device.serialFile \(directory)/serial")
        }
    }

    /// Bad serials in the file are refused naming the key and the file, and what it holds when that is printable.
    @Test(arguments: [
        ("UNIT-42\n", "holds \"UNIT-42\", not a serial"), ("", "holds nothing, not a serial"),
        ("\n\n", "holds nothing, not a serial"), (String(repeating: "A", count: 51), "holds \"AAAA"),
        ("SN 1", "holds \"SN 1\", not a serial"), ("S\u{1}N", "holds 3 bytes that are not all printable"),
    ])
    func aBadSerialFileIsNamed(content: String, expected: String) throws {
        let directory = temporaryDirectory()
        try content.write(toFile: directory + "/serial", atomically: true, encoding: .utf8)
        let found = try problems { $0 = serialConfig(["serialFile": directory + "/serial"]) }
        #expect(found.count == 1, "\(found)")
        #expect(found.first?.hasPrefix("device.serialFile: \(directory)/serial \(expected)") == true, "\(found)")
        #expect(
            found.first?.hasSuffix("must be 1 to 50 characters of A-Z a-z 0-9 (the DRS integration guide's rule)")
                == true)
    }

    @Test func aMissingSerialFileIsNamed() throws {
        let found = try problems { $0 = serialConfig(["serialFile": "/nonexistent/serial"]) }
        #expect(
            found == [
                "device.serialFile: no such file /nonexistent/serial (the factory writes each unit's serial there)"
            ])
    }

    /// `device.serialSource: "device-tree"`: the board's serial number, NUL-terminated; the first path that exists
    /// counts (the paths are injected here).
    @Test func aSerialFromTheDeviceTree() throws {
        let directory = temporaryDirectory()
        let file = directory + "/serial-number"
        try Data("10000000abcdef12\0".utf8).write(to: URL(fileURLWithPath: file))
        let text = Self.configText.replacingOccurrences(
            of: #""serial":"SN0001""#, with: #""serialSource":"device-tree""#)
        let (config, problems, _) = try parseText(text, deviceTree: [directory + "/missing", file])
        #expect(problems == [])
        #expect(config?.device.serial == "10000000abcdef12")
        #expect(config?.device.serialSource == .deviceTree(file))
        #expect(config?.device.serialSource.name == "device-tree")

        try Data("1000-0000\0".utf8).write(to: URL(fileURLWithPath: file))
        #expect(
            try parseText(text, deviceTree: [file]).1 == [
                "device.serialSource: \(file) holds \"1000-0000\", not a serial: must be 1 to 50 characters of A-Z a-z 0-9 (the DRS integration guide's rule)"
            ])
        let none = try parseText(text, deviceTree: [directory + "/missing"]).1
        #expect(
            none.count == 1
                && none[0].hasPrefix("device.serialSource: no device-tree serial number at \(directory)/missing"))
    }

    /// Exactly one way to give the serial.
    @Test func theSerialIsGivenExactlyOneWay() throws {
        #expect(try problems { $0 = serialConfig([:]) }.first?.hasPrefix("device.serial: is required") == true)
        #expect(
            try problems { $0 = serialConfig(["serial": "SN1", "serialFile": "/etc/replenish-agent/serial"]) } == [
                "device.serialFile: cannot be combined with device.serial: give the serial one way only"
            ])
        #expect(
            try problems { $0 = serialConfig(["serialSource": "eeprom"]) } == [
                #"device.serialSource: must be "device-tree" (the board's own serial number), found "eeprom"; for a file use device.serialFile"#
            ])
        #expect(
            try problems { $0 = serialConfig(["serialFile": 5]) } == [
                "device.serialFile: must be a string, found a number"
            ])
    }
}
