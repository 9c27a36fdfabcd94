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

        // lwa
        var lwa: LWA?
        var codePairURLGiven = false
        if var reader = ObjectReader(
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

        // drs
        var drsBaseURL: EndpointURL?
        if var reader = ObjectReader(
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
            do {
                if let bytes = try POSIX.readFile(resolved) {
                    let syntax = JSONSyntax.inspect(bytes)
                    if case .fault(let fault) = syntax {
                        problems.add("board", fault.describe(file: resolved))
                    } else if case .valid(let duplicates) = syntax, let json = try? JSONValue.parse(bytes) {
                        for key in duplicates { problems.add(resolved, "\(key): \(duplicateKeyProblem)") }
                        board = BoardFile.parse(json, file: resolved, problems: &problems)
                        if !duplicates.isEmpty { board = nil }
                    } else {
                        problems.add("board", "\(resolved) is not valid JSON")
                    }
                } else {
                    problems.add("board", "no board file at \(resolved)\(boardFilesNear(resolved))")
                }
            } catch {
                problems.add("board", error.message)
            }
        }

        // buttons
        var buttons: [Button] = []
        if let value = top.value("buttons", required: true, problems: &problems) {
            if case .array(let items) = value {
                if items.isEmpty { problems.add("buttons", "must map at least one input to a slot") }
                var inputsSeen: Set<String> = []
                for (index, item) in items.enumerated() {
                    guard var reader = ObjectReader(item, path: "buttons[\(index)]", problems: &problems) else {
                        continue
                    }
                    let input = reader.string("input", problems: &problems)
                    let slot = reader.string("slot", problems: &problems)
                    if let input {
                        if let board, board.input(named: input) == nil {
                            problems.add(reader.child("input"), "the board file has no input named \"\(input)\"")
                        }
                        if !inputsSeen.insert(input).inserted {
                            problems.add(reader.child("input"), "\"\(input)\" is mapped twice")
                        }
                    }
                    if let slot, !isValidSlot(slot) {
                        problems.add(reader.child("slot"), "must be 1 to 255 characters of A-Z a-z 0-9 - . _ ~")
                    }
                    placeholders.append((reader.child("slot"), .slot, slot))
                    let cooldown = reader.integer("cooldownSeconds", in: 0...86400, problems: &problems) ?? 60
                    let quantity = reader.number("quantity", in: 0.001...1_000_000, problems: &problems)
                    let remaining = reader.number("remainingWhenLow", in: 0...1_000_000, problems: &problems)
                    if let remaining {
                        if let quantity, remaining >= quantity {
                            problems.add(reader.child("remainingWhenLow"), "must be less than quantity (\(quantity))")
                        } else if quantity == nil {
                            problems.add(reader.child("remainingWhenLow"), "needs quantity (what a refill holds)")
                        }
                    }
                    reader.reportUnknownKeys(problems: &problems)
                    if let input, let slot {
                        buttons.append(
                            Button(
                                input: input, slot: slot, cooldownSeconds: cooldown, quantity: quantity,
                                remainingWhenLow: remaining ?? 0))
                    }
                }
            } else {
                problems.add("buttons", "must be an array")
            }
        }

        // pairing
        var mode = PairingMode.companion
        var listen: Listen?
        var windowMinutes = 10
        var setupKey: SetupKey?
        var setupKeyGiven = false
        if var reader = ObjectReader(
            top.value("pairing", required: true, problems: &problems) ?? .object([:]),
            path: "pairing", problems: &problems)
        {
            if let name = reader.string("mode", required: false, problems: &problems) {
                if let known = PairingMode(rawValue: name) {
                    mode = known
                } else {
                    problems.add("pairing.mode", "must be \"companion\" or \"code\", found \"\(name)\"")
                }
            }
            // The code flow opens no port: `listen` is needed only for the companion app.
            if let text = reader.string("listen", required: mode == .companion, problems: &problems) {
                listen = parseListen(text)
                if listen == nil { problems.add("pairing.listen", "must be HOST:PORT with a port from 1 to 65535") }
            }
            windowMinutes = reader.integer("windowMinutes", in: 1...1440, problems: &problems) ?? 10
            if let file = reader.string("setupKeyFile", required: false, problems: &problems) {
                setupKeyGiven = true
                setupKey = readSetupKeyFile(POSIX.join(configDirectory, file), problems: &problems)
            }
            reader.reportUnknownKeys(problems: &problems)
        }
        if mode == .companion, !setupKeyGiven, device?.phase == .production {
            problems.add("pairing.setupKeyFile", setupKeyRequiredInProduction)
        }
        if mode == .code, !codePairURLGiven {
            problems.add("lwa.codePairURL", "is required when pairing.mode is \"code\"")
        }

        top.reportUnknownKeys(problems: &problems)
        placeholderProblems(placeholders, problems: &problems)
        guard problems.lines.count == before, let device, let lwa, let drsBaseURL, let stateDirectory, let board,
            let boardPath, mode == .code || listen != nil
        else { return nil }
        return AgentConfig(
            device: device, lwa: lwa, drsBaseURL: drsBaseURL, caFile: caFile, stateDirectory: stateDirectory,
            boardPath: boardPath, board: board, buttons: buttons, pairingMode: mode, pairingListen: listen,
            pairingWindowMinutes: windowMinutes, pairingSetupKey: setupKey, runtimeDirectory: runtimeDirectory,
            path: path)
    }

    /// Why a production config without a setup key is refused.
    static let setupKeyRequiredInProduction =
        "is required in the production phase: the setup key on the device's label lets the customer's phone tell the device from an impostor on the network (make it with replenish-agent make-setup-key PATH)"

    /// Why a test or certification config without a setup key is only warned about (`check-config`, `run`).
    static let setupKeyMissingWarning =
        "pairing.setupKeyFile: not set; pairing works without proofs (any host on the network could pose as the device, or pair it first), which the production phase refuses"

    /// The setup key in `path`: 32 lowercase hex digits and at most a newline, in a file that only its owner
    /// may read (no group or other bits). Problems name `pairing.setupKeyFile` and never show the contents.
    private static func readSetupKeyFile(_ path: String, problems: inout Problems) -> SetupKey? {
        let key = "pairing.setupKeyFile"
        guard
            let bytes = problems.readFile(
                path, key: key, missing: "no such file \(path) (the factory makes it: replenish-agent make-setup-key)",
                limit: 4096)
        else { return nil }
        guard let setupKey = SetupKey(fileContents: bytes) else {
            problems.add(
                key, "\(path) does not hold a setup key: 32 lowercase hex digits (16 bytes), then at most a newline")
            return nil
        }
        do {
            if let info = try POSIX.status(path), info.isReachableByOthers {
                problems.add(
                    key,
                    "\(path) holds the setup key and group or others may access it (mode \(info.octalPermissions)); chmod 600, owned by the agent's user"
                )
                return nil
            }
        } catch {
            problems.add(key, error.message)
            return nil
        }
        return setupKey
    }

    /// `; board files in /usr/share/replenish-agent/board: raspberry-pi-4b.json, simulated.json`: what a wrong
    /// board path could have meant (the `.json` files of the folder it names), or that the folder is missing.
    static func boardFilesNear(_ path: String) -> String {
        let directory = POSIX.parentDirectory(of: path)
        guard let names = try? POSIX.directoryEntries(directory) else { return "; no folder \(directory)" }
        let boards = names.filter { $0.hasSuffix(".json") }
        if boards.isEmpty { return "; \(directory) has no .json board files" }
        return "; board files in \(directory): \(boards.joined(separator: ", "))"
    }

    private static func url(_ text: String?, at path: String, problems: inout Problems) -> EndpointURL? {
        guard let text else { return nil }
        do {
            return try EndpointURL(text)
        } catch {
            problems.add(path, error.message)
            return nil
        }
    }

    /// Serials and model ids: `A-Z a-z 0-9 - + _`, 1 to 64 characters (the DRS web guide's rule).
    /// A serial number: alphanumeric, at most 50 characters (the DRS integration guide; stricter than the web
    /// guide, so a serial that passes is accepted by both).
    static func isValidSerial(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 50 && text.utf8.allSatisfy(isAlphanumeric)
    }

    /// A device model id: `A-Z a-z 0-9 - + _`, at most 64 (model ids are often UUIDs).
    static func isValidIdentifier(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64
            && text.utf8.allSatisfy {
                isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "_")
            }
    }

    /// Slot ids go into URL paths, so only RFC 3986 unreserved characters are allowed.
    static func isValidSlot(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 255
            && text.utf8.allSatisfy {
                isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_")
                    || $0 == UInt8(ascii: "~")
            }
    }

    /// `HOST:PORT` or `[IPv6]:PORT`.
    static func parseListen(_ text: String) -> Listen? {
        guard let colon = text.lastIndex(of: ":") else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, let port = Int(text[text.index(after: colon)...]), (1...65535).contains(port) else {
            return nil
        }
        return Listen(host: host, port: port)
    }
}

/// Every problem found in a config, one a line, each naming the key path or the file.
struct ConfigError: Error, Sendable {
    var problems: [String]
}
