import Foundation
import Testing

@testable import ReplenishAgent

/// Each rule of the config and board files: one broken config a case, checked for the key path it names.
@Suite(.tags(.unit)) struct ConfigTests {
    /// A config in pairing `mode` (`companion` or `code`) whose state directory exists (0700), loaded.
    static func loadedConfig(pairingMode mode: String = "companion") throws -> AgentConfig {
        let directory = temporaryDirectory()
        mkdir(directory + "/state", 0o700)
        try JSONSerialization.data(withJSONObject: ConfigTests.simulatedBoard).write(
            to: URL(fileURLWithPath: directory + "/board.json"))
        var config = ConfigTests.validConfig()
        config["stateDirectory"] = directory + "/state"
        config["runtimeDirectory"] = directory + "/run"
        config["lwa"] = (config["lwa"] as! [String: Any]).merging(["codePairURL": "https://a.example/codepair"]) {
            $1
        }
        config["pairing"] = mode == "code" ? ["mode": "code"] : ["listen": "127.0.0.1:1"]
        try JSONSerialization.data(withJSONObject: config).write(to: URL(fileURLWithPath: directory + "/agent.json"))
        return try AgentConfig.load(path: directory + "/agent.json")
    }

    static func validConfig() -> [String: Any] {
        [
            "device": ["serial": "SN0001", "model": "5f4f1c5e-1234", "phase": "test"],
            "lwa": ["clientId": "amzn1.application-oa2-client.x", "tokenURL": "https://api.amazon.com/auth/o2/token"],
            "drs": ["baseURL": "https://dash-replenishment-service-na.amazon.com"],
            "stateDirectory": "/var/lib/replenish-agent",
            "board": "board.json",
            "buttons": [["input": "button", "slot": "0b4f6c1e-aaaa"]],
            "pairing": ["listen": "0.0.0.0:8642"],
        ]
    }

    nonisolated(unsafe) static let simulatedBoard: [String: Any] = [
        "backend": "simulated", "inputs": [["name": "button"]], "outputs": [["name": "led"]],
    ]

    /// Writes `config` and `board` to a fresh directory and loads them; returns the config or its problems.
    func load(_ config: [String: Any], board: [String: Any] = simulatedBoard) throws -> (AgentConfig?, [String]) {
        let directory = temporaryDirectory()
        try JSONSerialization.data(withJSONObject: board).write(to: URL(fileURLWithPath: directory + "/board.json"))
        try JSONSerialization.data(withJSONObject: config).write(to: URL(fileURLWithPath: directory + "/agent.json"))
        var problems = Problems()
        let loaded = AgentConfig.parse(path: directory + "/agent.json", problems: &problems)
        return (loaded, problems.lines)
    }

    func problems(_ change: (inout [String: Any]) -> Void, board: [String: Any] = simulatedBoard) throws -> [String] {
        var config = Self.validConfig()
        change(&config)
        let (loaded, problems) = try load(config, board: board)
        #expect(loaded == nil || problems.isEmpty)
        return problems
    }

    @Test func validConfigLoads() throws {
        let (config, problems) = try load(Self.validConfig())
        #expect(problems == [])
        let loaded = try #require(config)
        #expect(loaded.device.phase == .test)
        #expect(loaded.device.phase.isTestDevice && loaded.device.phase.shouldIncludeNonLive)
        #expect(loaded.board.backend == .simulated)
        #expect(loaded.board.input(named: "button")?.debounceMilliseconds == 30)
        #expect(loaded.slot(forInput: "button") == "0b4f6c1e-aaaa")
        #expect(loaded.pairingListen == .init(host: "0.0.0.0", port: 8642))
        #expect(loaded.caFile == nil && loaded.drs?.lwa.clientSecret == nil)
    }

    /// `wifiSetup`: off unless present; its access point's passphrase needs the setup key; names and ranges checked.
    @Test func wifiSetupIsOffByDefaultNeedsTheSetupKeyAndChecksItsKeys() throws {
        #expect(try load(Self.validConfig()).0?.wifiSetup == nil)
        #expect(try problems { $0["wifiSetup"] = ["enabled": false] } == [])
        #expect(
            try problems { $0["wifiSetup"] = ["interface": "wlan0"] } == [
                "wifiSetup: needs pairing.setupKeyFile (the access point's passphrase comes from the setup key)"
            ])
        let bad = try problems {
            $0["wifiSetup"] = ["accessPointInterface": "ap0; rm -rf", "openMinutes": 0, "port": 70000, "other": 1]
        }
        #expect(
            bad.contains(
                "wifiSetup.accessPointInterface: must be an interface name of 1 to 15 characters of A-Z a-z 0-9 - _ ."))
        #expect(bad.contains("wifiSetup.openMinutes: must be a whole number from 1 to 1440"))
        #expect(bad.contains("wifiSetup.port: must be a whole number from 1 to 65535"))
        #expect(bad.contains { $0.hasPrefix("wifiSetup.other:") })
    }

    @Test func pairingWindowMinutesDefaultsTo10AndIsChecked() throws {
        #expect(try load(Self.validConfig()).0?.pairingWindowMinutes == 10)
        var config = Self.validConfig()
        config["pairing"] = ["listen": "0.0.0.0:8642", "windowMinutes": 1440]
        #expect(try load(config).0?.pairingWindowMinutes == 1440)
        for bad: Any in [0, 1441, 2.5, "10"] {
            let found = try problems { $0["pairing"] = ["listen": "0.0.0.0:8642", "windowMinutes": bad] }
            #expect(found == ["pairing.windowMinutes: must be a whole number from 1 to 1440"], "\(bad)")
        }
    }

    @Test func phasesDecideTheFlags() {
        #expect(AgentConfig.Phase.certification.isTestDevice == false)
        #expect(AgentConfig.Phase.certification.shouldIncludeNonLive == true)
        #expect(AgentConfig.Phase.production.isTestDevice == false)
        #expect(AgentConfig.Phase.production.shouldIncludeNonLive == false)
    }

    @Test func unknownKeysAreNamedByPath() throws {
        let found = try problems {
            $0["extra"] = 1
            $0["device"] = ["serial": "SN1", "model": "m", "phase": "test", "colour": "red"]
        }
        #expect(found.contains("extra: unknown key"))
        #expect(found.contains("device.colour: unknown key"))
    }

    @Test func missingKeysAreNamedByPath() throws {
        let found = try problems {
            $0["drs"] = [String: Any]()
            $0.removeValue(forKey: "pairing")
            $0["lwa"] = ["clientId": "x"]
        }
        #expect(found.contains("drs.baseURL: is required"))
        #expect(found.contains("pairing: is required"))
        #expect(found.contains("lwa.tokenURL: is required"))
    }

    @Test func wrongTypesAreReported() throws {
        let found = try problems {
            $0["stateDirectory"] = 5
            $0["buttons"] = "button"
        }
        #expect(found.contains("stateDirectory: must be a string, found a number"))
        #expect(found.contains("buttons: must be an array"))
    }

    @Test func phaseMustBeKnown() throws {
        let found = try problems { $0["device"] = ["serial": "SN1", "model": "m", "phase": "beta"] }
        #expect(found.contains { $0.hasPrefix("device.phase:") })
    }

    @Test(arguments: [
        "", "has space", "semi;colon", String(repeating: "a", count: 51), "SN-1", "SN+1", "SN_1", "séria1",
    ])
    func serialCharacterSet(serial: String) throws {
        let found = try problems { $0["device"] = ["serial": serial, "model": "m", "phase": "test"] }
        #expect(found.contains { $0.hasPrefix("device.serial:") })
    }

    @Test func aSerialOfFiftyAlphanumericsIsAccepted() throws {
        let serial = String(repeating: "aZ9", count: 16) + "xy"
        #expect(serial.count == 50)
        let found = try problems { $0["device"] = ["serial": serial, "model": "m", "phase": "test"] }
        #expect(found.isEmpty, "\(found)")
    }

    @Test func modelCharacterSet() throws {
        let found = try problems { $0["device"] = ["serial": "SN1", "model": "bad/model", "phase": "test"] }
        #expect(found == ["device.model: must be 1 to 64 characters of A-Z a-z 0-9 - + _"])
    }

    @Test(arguments: [
        ("http://example.com/token", false), ("ftp://127.0.0.1/x", false), ("not a url", false),
        ("http://127.0.0.1:8641/auth/o2/token", true), ("http://localhost:1/x", true), ("http://[::1]:2/x", true),
        ("https://api.amazon.co.uk/auth/o2/token", true), ("http://127.0.0.1.evil.com/x", false),
        ("https://user:pw@api.amazon.com/x", false),
    ])
    func urlSchemes(url: String, accepted: Bool) throws {
        let found = try problems { $0["lwa"] = ["clientId": "c", "tokenURL": url] }
        #expect(found.contains { $0.hasPrefix("lwa.tokenURL:") } == !accepted)
    }

    @Test func buttonsMustNameBoardInputsAndSafeSlots() throws {
        let found = try problems {
            $0["buttons"] = [
                ["input": "nope", "slot": "a/b"], ["input": "button", "slot": "ok"],
                ["input": "button", "slot": "ok2"],
            ]
        }
        #expect(found.contains("buttons[0].input: the board file has no input named \"nope\""))
        #expect(found.contains { $0.hasPrefix("buttons[0].slot:") })
        #expect(found.contains("buttons[2].input: \"button\" is mapped twice"))
    }

    @Test func aSlotsQuantitiesAreOptionalAndChecked() throws {
        var config = Self.validConfig()
        config["buttons"] = [["input": "button", "slot": "s", "quantity": 10, "remainingWhenLow": 2.5]]
        let loaded = try #require(try load(config).0)
        #expect(loaded.buttons.first?.quantity == 10 && loaded.buttons.first?.remainingWhenLow == 2.5)
        #expect(try load(Self.validConfig()).0?.buttons.first?.quantity == nil)
        let cases: [([String: Any], String)] = [
            (["quantity": 0], "buttons[0].quantity: must be a number"),
            (["quantity": "10"], "buttons[0].quantity: must be a number"),
            (["quantity": 10, "remainingWhenLow": 10], "buttons[0].remainingWhenLow: must be less than quantity"),
            (["remainingWhenLow": 1], "buttons[0].remainingWhenLow: needs quantity"),
            (["quantity": 10, "remainingWhenLow": -1], "buttons[0].remainingWhenLow: must be a number"),
        ]
        for (extra, expected) in cases {
            let problems = try problems { config in
                config["buttons"] = [["input": "button", "slot": "s"].merging(extra) { $1 }]
            }
            #expect(problems.contains { $0.contains(expected) }, "\(extra): \(problems)")
        }
    }

    @Test func pairingListenMustBeHostAndPort() throws {
        for bad in ["8642", "host:0", "host:70000", ":80"] {
            let found = try problems { $0["pairing"] = ["listen": bad] }
            #expect(found.contains { $0.hasPrefix("pairing.listen:") }, "\(bad)")
        }
    }

    @Test func pairingModeDefaultsToCompanionAndCodeModeNeedsACodePairURL() throws {
        let companion = try #require(try load(Self.validConfig()).0)
        #expect(companion.pairingMode == .companion && companion.drs?.lwa.codePairURL == nil)
        func codeMode(_ lwa: [String: Any], pairing: [String: Any] = ["mode": "code"]) -> [String: Any] {
            var config = Self.validConfig()
            config["lwa"] = (config["lwa"] as! [String: Any]).merging(lwa) { $1 }
            config["pairing"] = pairing
            return config
        }
        // Code mode: no port, so no listen needed; the code pair URL is.
        let (loaded, none) = try load(codeMode(["codePairURL": "https://api.amazon.com/auth/O2/create/codepair"]))
        #expect(none == [])
        #expect(loaded?.pairingMode == .code && loaded?.pairingListen == nil)
        #expect(loaded?.drs?.lwa.codePairURL?.text == "https://api.amazon.com/auth/O2/create/codepair")
        #expect(try load(codeMode(["codePairURL": "http://127.0.0.1:8641/auth/O2/create/codepair"])).1 == [])
        #expect(try load(codeMode([:])).1 == [#"lwa.codePairURL: is required when pairing.mode is "code""#])
        #expect(
            try load(codeMode(["codePairURL": "http://example.com/auth/O2/create/codepair"])).1 == [
                "lwa.codePairURL: http:// is allowed only for loopback hosts; use https://"
            ])
        #expect(try load(codeMode(["codePairURL": 5])).1 == ["lwa.codePairURL: must be a string, found a number"])
        // Companion mode keeps listen required; a code pair URL there is allowed (unused).
        #expect(
            try load(codeMode(["codePairURL": "https://a.example/c"], pairing: ["mode": "companion"])).1 == [
                "pairing.listen: is required"
            ])
        #expect(try load(codeMode(["codePairURL": "https://a.example/c"], pairing: ["listen": "0.0.0.0:1"])).1 == [])
        #expect(
            try load(codeMode([:], pairing: ["mode": "qr", "listen": "0.0.0.0:1"])).1 == [
                #"pairing.mode: must be "companion" or "code", found "qr""#
            ])
        #expect(
            try load(codeMode(["codePairURL": "https://a.example/c"], pairing: ["mode": "code", "colour": 1])).1 == [
                "pairing.colour: unknown key"
            ])
    }

    @Test func stateDirectoryMustBeAbsolute() throws {
        #expect(try problems { $0["stateDirectory"] = "state" } == ["stateDirectory: must be an absolute path"])
    }

    @Test func caFileMustBeReadable() throws {
        let found = try problems { $0["tls"] = ["caFile": "/nonexistent/ca.pem"] }
        #expect(found.contains { $0.hasPrefix("tls.caFile:") })
    }

    @Test func shippedConfigsAndBoardsAreValid() throws {
        let root = packageRoot()
        for config in ["config/simulated.json", "config/agent.example.json"] {
            var problems = Problems()
            _ = AgentConfig.parse(path: root + "/" + config, problems: &problems)
            // The example names the installed board path; check it against the repository's copy instead. Its
            // placeholders are problems of their own (`theShippedExampleGivesOneProblemPerPlaceholderKey`).
            let relevant = problems.lines.filter {
                !$0.hasPrefix("board:") && !$0.hasPrefix("tls.caFile:") && !$0.hasPrefix("pairing.setupKeyFile:")
                    && !$0.contains("still the example's placeholder")
            }
            #expect(relevant == [], "\(config)")
        }
        for board in [
            "board/simulated.json", "board/raspberry-pi-3b.json", "board/raspberry-pi-4b.json",
            "board/raspberry-pi-5.json", "board/generic-gpiod.json",
        ] {
            var problems = Problems()
            let bytes = try #require(try POSIX.readFile(root + "/" + board))
            let parsed = BoardFile.parse(try JSONValue.parse(bytes), file: board, problems: &problems)
            #expect(problems.lines == [], "\(board)")
            #expect(parsed?.input(named: "button") != nil)
        }
    }

    /// Writes the config and board files as text (what `JSONSerialization` cannot write: a key twice) and
    /// loads them; returns the problems.
    func problems(configText: String, boardText: String) throws -> (directory: String, lines: [String]) {
        let directory = temporaryDirectory()
        try boardText.write(toFile: directory + "/board.json", atomically: true, encoding: .utf8)
        try configText.write(toFile: directory + "/agent.json", atomically: true, encoding: .utf8)
        var problems = Problems()
        let loaded = AgentConfig.parse(path: directory + "/agent.json", problems: &problems)
        #expect(loaded == nil || problems.isEmpty)
        return (directory, problems.lines)
    }

    static let configText = #"""
        {"device":{"serial":"SN0001","model":"m-1","phase":"test"},
         "lwa":{"clientId":"c","tokenURL":"https://api.amazon.com/auth/o2/token"},
         "drs":{"baseURL":"https://dash-replenishment-service-na.amazon.com"},
         "stateDirectory":"/var/lib/replenish-agent","board":"board.json",
         "buttons":[{"input":"button","slot":"s-1"}],"pairing":{"listen":"0.0.0.0:8642"}}
        """#
    static let boardText = #"{"backend":"simulated","inputs":[{"name":"button"}],"outputs":[{"name":"led"}]}"#

    /// jq and Python read the last of two equal keys, FoundationEssentials the first: a key twice is refused,
    /// named with its path, at any depth, in the config and in the board file (escapes compared decoded).
    @Test func aKeyTwiceIsNamedWithItsPath() throws {
        #expect(try problems(configText: Self.configText, boardText: Self.boardText).lines == [])
        let cases: [(String, String)] = [
            (#""serial":"SN0001","#, "device.serial"),
            (#""board":"board.json","#, "board"),
            (#""slot":"s-1""#, "buttons[0].slot"),
            (#""phase":"test""#, "device.phase"),
        ]
        for (original, path) in cases {
            let doubled = Self.configText.replacingOccurrences(
                of: original, with: original.hasSuffix(",") ? original + original : original + "," + original)
            let found = try problems(configText: doubled, boardText: Self.boardText).lines
            #expect(found.contains { $0.hasPrefix("\(path): appears twice") }, "\(path): \(found)")
        }
        let escaped = Self.configText.replacingOccurrences(
            of: #""serial":"SN0001","#, with: #""serial":"SN0001","seri\u0061l":"SN0002","#)
        #expect(
            try problems(configText: escaped, boardText: Self.boardText).lines.contains {
                $0.hasPrefix("device.serial: appears twice")
            })
        let board = #"{"backend":"simulated","inputs":[{"name":"button","name":"button2"}],"outputs":[]}"#
        let (directory, found) = try problems(configText: Self.configText, boardText: board)
        #expect(found.contains { $0.hasPrefix("\(directory)/board.json: inputs[0].name: appears twice") }, "\(found)")
    }

    /// A device file (or a FIFO: the process test, since a FIFO would block the unfixed read forever) is not read
    /// as the config, the board file or the CA file: refused with the key path, without reading a byte.
    @Test func aDeviceFileIsRefusedAsTheConfigBoardOrCAFile() throws {
        for device in ["/dev/zero", "/dev/null"] {
            var problems = Problems()
            #expect(AgentConfig.parse(path: device, problems: &problems) == nil)
            #expect(problems.lines == ["\(device): \(device) is a character device, not a regular file"])
            let board = try self.problems { $0["board"] = device }
            #expect(board == ["board: \(device) is a character device, not a regular file"])
            let ca = try self.problems { $0["tls"] = ["caFile": device] }
            #expect(ca == ["tls.caFile: \(device) is a character device, not a regular file"])
        }
    }

    @Test func notJSONIsOneProblemWithLineAndColumn() throws {
        let directory = temporaryDirectory()
        try "{ nope".write(toFile: directory + "/agent.json", atomically: true, encoding: .utf8)
        var problems = Problems()
        #expect(AgentConfig.parse(path: directory + "/agent.json", problems: &problems) == nil)
        #expect(problems.lines == ["\(directory)/agent.json:1:3: 'n' where a key in double quotes was expected"])
    }
}
