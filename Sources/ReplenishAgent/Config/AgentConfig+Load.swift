/// Reading and checking `agent.json` and the board file it names.
extension AgentConfig {
    /// Loads the config at `path` and its board file. Throws an error carrying every problem, one a line.
    static func load(path: String) throws(ConfigError) -> AgentConfig {
        var problems = Problems()
        let config = parse(path: path, problems: &problems)
        guard problems.isEmpty, let config else { throw ConfigError(problems: problems.lines) }
        return config
    }

    /// `deviceTreeSerialPaths`: where `device.serialSource: "device-tree"` looks (tests give their own files).
    static func parse(
        path: String, problems: inout Problems, deviceTreeSerialPaths: [String] = AgentConfig.deviceTreeSerialPaths
    ) -> AgentConfig? {
        guard let bytes = problems.readFile(path, key: path, missing: "no such file") else { return nil }
        let duplicates: [String]
        switch JSONSyntax.inspect(bytes) {
        case .fault(let fault):
            problems.add("\(path):\(fault.line):\(fault.column)", fault.message)
            return nil
        case .valid(let duplicateKeys): duplicates = duplicateKeys
        }
        guard let json = try? JSONValue.parse(bytes) else {
            problems.add(path, "is not valid JSON")
            return nil
        }
        for key in duplicates { problems.add(key, duplicateKeyProblem) }
        let config = parse(json, path: path, problems: &problems, deviceTreeSerialPaths: deviceTreeSerialPaths)
        return duplicates.isEmpty ? config : nil
    }

    /// What is wrong with a key given twice in one object (`JSONSyntax.inspect`).
    static let duplicateKeyProblem =
        "appears twice; JSON readers disagree on which one counts (this agent would read the first, jq and Python the last): keep one"

    static func parse(
        _ json: JSONValue, path: String, problems: inout Problems,
        deviceTreeSerialPaths: [String] = AgentConfig.deviceTreeSerialPaths
    ) -> AgentConfig? {
        let before = problems.lines.count
        guard var top = ObjectReader(json, path: "", problems: &problems) else { return nil }
        let configDirectory = POSIX.parentDirectory(of: path)
        // Values still at the example's placeholders, checked once the rest is read: one line per key.
        var placeholders: [(path: String, key: PlaceholderKey, value: String?)] = []

        // program: which of Amazon's programs the device speaks (docs/programs.md)
        var program = Program.drs
        if let name = top.string("program", required: false, problems: &problems) {
            if let known = Program(rawValue: name) {
                program = known
            } else {
                problems.add("program", "must be \"drs\" or \"alexa\", found \"\(name)\"")
            }
        }
        let isDRS = program == .drs
        /// A section of the other program, given anyway: it would do nothing, so it is refused.
        func refuseOutsideProgram(_ key: String, why: String) {
            if top.value(key, required: false, problems: &problems) != nil {
                problems.add(key, "is not used by program \"\(program.rawValue)\" (\(why)): remove it")
            }
        }

        // device
        var device: Device?
        if var reader = ObjectReader(
            top.value("device", required: true, problems: &problems) ?? .object([:]),
            path: "device", problems: &problems)
        {
            let serial = readSerial(
                &reader, configDirectory: configDirectory, deviceTreeSerialPaths: deviceTreeSerialPaths,
                problems: &problems)
            if serial?.source == .config { placeholders.append(("device.serial", .serial, serial?.serial)) }
            let model = reader.string("model", problems: &problems)
            if let model, !isValidIdentifier(model) {
                problems.add("device.model", "must be 1 to 64 characters of A-Z a-z 0-9 - + _")
            }
            let phaseName = reader.string("phase", problems: &problems)
            let phase = phaseName.flatMap(Phase.init(rawValue:))
            if let phaseName, phase == nil {
                problems.add(
                    "device.phase", "must be \"test\", \"certification\" or \"production\", found \"\(phaseName)\"")
            }
            placeholders.append(("device.model", .model, model))
            reader.reportUnknownKeys(problems: &problems)
            if let serial, let model, let phase {
                device = Device(serial: serial.serial, model: model, phase: phase, serialSource: serial.source)
            }
        }

        // lwa (drs)
        var lwa: LWA?
        var codePairURLGiven = false
        if !isDRS {
            refuseOutsideProgram("lwa", why: "in program \"alexa\" the maker's cloud holds Amazon's tokens")
        } else if var reader = ObjectReader(
            top.value("lwa", required: true, problems: &problems) ?? .object([:]),
            path: "lwa", problems: &problems)
        {
            let clientId = reader.string("clientId", problems: &problems)
            if let clientId, clientId.isEmpty || clientId.utf8.count > 256 || clientId.containsText(" ") {
                problems.add("lwa.clientId", "must be 1 to 256 characters without spaces")
            }
            let secret = reader.string("clientSecret", required: false, problems: &problems)
            if let secret, secret.isEmpty {
                problems.add("lwa.clientSecret", "must not be empty (leave it out instead)")
            }
            placeholders += [("lwa.clientId", .clientId, clientId), ("lwa.clientSecret", .clientSecret, secret)]
            let tokenURL = url(reader.string("tokenURL", problems: &problems), at: "lwa.tokenURL", problems: &problems)
            // Given at all (even of the wrong type, reported as such): not also "required" below.
            codePairURLGiven = reader.value("codePairURL", required: false, problems: &problems) != nil
            let codePairText = reader.string("codePairURL", required: false, problems: &problems)
            let codePairURL = url(codePairText, at: "lwa.codePairURL", problems: &problems)
            reader.reportUnknownKeys(problems: &problems)
            if let clientId, let tokenURL, codePairText == nil || codePairURL != nil {
                lwa = LWA(
                    clientId: clientId, clientSecret: secret.map(Secret.init), tokenURL: tokenURL,
                    codePairURL: codePairURL)
            }
        }

        // drs (drs)
        var drsBaseURL: EndpointURL?
        if !isDRS {
            refuseOutsideProgram("drs", why: "in program \"alexa\" the unit reports to the maker's cloud")
        } else if var reader = ObjectReader(
            top.value("drs", required: true, problems: &problems) ?? .object([:]),
            path: "drs", problems: &problems)
        {
            drsBaseURL = url(reader.string("baseURL", problems: &problems), at: "drs.baseURL", problems: &problems)
            reader.reportUnknownKeys(problems: &problems)
        }

        // tls (optional)
        var caFile: String?
        if let tls = top.value("tls", required: false, problems: &problems),
            var reader = ObjectReader(tls, path: "tls", problems: &problems)
        {
            if let file = reader.string("caFile", required: false, problems: &problems) {
                let resolved = POSIX.join(configDirectory, file)
                do {
                    if try POSIX.readFile(resolved, limit: 4 << 20) == nil {
                        problems.add("tls.caFile", "cannot read \(resolved): no such file")
                    }
                } catch { problems.add("tls.caFile", error.message) }
                caFile = resolved
            }
            reader.reportUnknownKeys(problems: &problems)
        }

        let stateDirectory = top.string("stateDirectory", problems: &problems)
        if let stateDirectory, !stateDirectory.hasPrefix("/") {
            problems.add("stateDirectory", "must be an absolute path")
        }
        // The unit's RuntimeDirectory= (a tmpfs emptied at every boot); the agent keeps its boot marker there.
        let runtimeDirectory =
            top.string("runtimeDirectory", required: false, problems: &problems) ?? Self.defaultRuntimeDirectory
        if !runtimeDirectory.hasPrefix("/") {
            problems.add("runtimeDirectory", "must be an absolute path")
        }

        // board
        var board: BoardFile?
        var boardPath: String?
        if let relative = top.string("board", problems: &problems) {
            let resolved = POSIX.join(configDirectory, relative)
            boardPath = resolved
            board = readBoardFile(resolved, problems: &problems)
        }

        // buttons
        var buttons: [Button] = []
        var sensorProblems = false
        if let value = top.value("buttons", required: true, problems: &problems) {
            (buttons, sensorProblems) = parseButtons(
                value, board: board, program: program, placeholders: &placeholders, problems: &problems)
        }

        // pairing
        var mode = PairingMode.companion
        var listen: Listen?
        var windowMinutes = 10
        var setupKey: SetupKey?
        var setupKeyGiven = false
        if var reader = ObjectReader(
            top.value("pairing", required: isDRS, problems: &problems) ?? .object([:]),
            path: "pairing", problems: &problems)
        {
            // The alexa program pairs nothing on the device (the phone claims the unit in the maker's cloud): only
            // the label's key, for the Wi-Fi setup, is read.
            if !isDRS {
                for key in ["mode", "listen", "windowMinutes"]
                where reader.value(key, required: false, problems: &problems) != nil {
                    problems.add(
                        reader.child(key),
                        "is not used by program \"alexa\" (the phone claims the unit in the maker's cloud): remove it")
                }
            }
            if isDRS, let name = reader.string("mode", required: false, problems: &problems) {
                if let known = PairingMode(rawValue: name) {
                    mode = known
                } else {
                    problems.add("pairing.mode", "must be \"companion\" or \"code\", found \"\(name)\"")
                }
            }
            // The code flow opens no port: `listen` is needed only for the companion app.
            if isDRS, let text = reader.string("listen", required: mode == .companion, problems: &problems) {
                listen = parseListen(text)
                if listen == nil { problems.add("pairing.listen", "must be HOST:PORT with a port from 1 to 65535") }
            }
            if isDRS { windowMinutes = reader.integer("windowMinutes", in: 1...1440, problems: &problems) ?? 10 }
            if let file = reader.string("setupKeyFile", required: false, problems: &problems) {
                setupKeyGiven = true
                setupKey = readSetupKeyFile(
                    POSIX.join(configDirectory, file), agentUID: StateDirectory.expectedAgentUID(stateDirectory),
                    problems: &problems)
            }
            reader.reportUnknownKeys(problems: &problems)
        }
        if isDRS, mode == .companion, !setupKeyGiven, device?.phase == .production {
            problems.add("pairing.setupKeyFile", setupKeyRequiredInProduction)
        }
        if mode == .code, !codePairURLGiven {
            problems.add("lwa.codePairURL", "is required when pairing.mode is \"code\"")
        }

        let wifiSetup = parseWiFiSetup(
            top.value("wifiSetup", required: false, problems: &problems), problems: &problems)
        if wifiSetup != nil, !setupKeyGiven {
            problems.add(
                "wifiSetup", "needs pairing.setupKeyFile (the access point's passphrase comes from the setup key)")
        }

        // alexa (alexa)
        var alexa: AlexaSettings?
        if isDRS {
            refuseOutsideProgram("alexa", why: "it is the settings of program \"alexa\"")
        } else {
            alexa = parseAlexa(
                top.value("alexa", required: true, problems: &problems), device: device,
                configDirectory: configDirectory, stateDirectory: stateDirectory, problems: &problems)
        }

        top.reportUnknownKeys(problems: &problems)
        placeholderProblems(placeholders, problems: &problems)
        let drs = lwa.flatMap { lwa in drsBaseURL.map { DRSSettings(lwa: lwa, baseURL: $0) } }
        guard problems.lines.count == before, !sensorProblems, let device, let stateDirectory, let board,
            let boardPath, isDRS ? (drs != nil && (mode == .code || listen != nil)) : alexa != nil
        else { return nil }
        return AgentConfig(
            device: device, program: program, drs: drs, alexa: alexa, caFile: caFile, stateDirectory: stateDirectory,
            boardPath: boardPath, board: board, buttons: buttons, pairingMode: mode, pairingListen: listen,
            pairingWindowMinutes: windowMinutes, pairingSetupKey: setupKey, wifiSetup: wifiSetup,
            runtimeDirectory: runtimeDirectory, path: path)
    }

    /// `wifiSetup`: nil when absent or `"enabled": false`.
    private static func parseWiFiSetup(_ value: JSONValue?, problems: inout Problems) -> WiFiSetupConfig? {
        guard let value, var reader = ObjectReader(value, path: "wifiSetup", problems: &problems) else { return nil }
        var setup = WiFiSetupConfig()
        let enabled = reader.bool("enabled", problems: &problems) ?? true
        setup.interface = reader.string("interface", required: false, problems: &problems) ?? ""
        setup.accessPointInterface = reader.string("accessPointInterface", required: false, problems: &problems) ?? ""
        for (key, name) in [("interface", setup.interface), ("accessPointInterface", setup.accessPointInterface)]
        where !isInterfaceName(name) {
            problems.add(reader.child(key), "must be an interface name of 1 to 15 characters of A-Z a-z 0-9 - _ .")
        }
        setup.openMinutes = reader.integer("openMinutes", in: 1...1440, problems: &problems) ?? 15
        setup.port = reader.integer("port", in: 1...65535, problems: &problems) ?? 8644
        reader.reportUnknownKeys(problems: &problems)
        return enabled ? setup : nil
    }

    /// Empty (NetworkManager's choice) or a Linux interface name.
    private static func isInterfaceName(_ name: String) -> Bool {
        name.isEmpty
            || (name.utf8.count <= 15
                && name.utf8.allSatisfy {
                    isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".")
                })
    }
}
