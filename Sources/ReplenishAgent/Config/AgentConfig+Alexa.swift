/// The alexa program's settings (`program: "alexa"`, docs/programs.md and docs/configuration.md): the maker's
/// cloud, the unit's certificate, and what each input tells of its slot's supply.
extension AgentConfig {
    /// `alexa`: where the unit reports, and the certificate and key it proves itself with (mutual TLS).
    struct AlexaSettings: Sendable {
        /// The maker's cloud (`alexa.cloudURL`): reports go to `{cloudURL}/v1/units/{unitId}/reports`.
        var cloudURL: EndpointURL
        /// The unit's X.509 certificate, PEM (`alexa.certificateFile`).
        var certificateFile: String
        /// Its private key, PEM, readable by the agent's user only (`alexa.keyFile`).
        var keyFile: String
        /// The unit's id in the cloud (`alexa.unitId`, default `device.serial`): the subject CN of its certificate.
        var unitId: String
        /// Load cells read through the kernel (`alexa.scales`): each gives its slot's level.
        var scales: [Scale] = []
    }

    /// A load cell whose counts the kernel gives in a file (`alexa.scales[]`): an IIO ADC such as the HX711's
    /// driver (`/sys/bus/iio/devices/iio:deviceN/in_voltage0_raw`), read every `pollSeconds`; its slot's level is
    /// `(counts - zeroCounts) / countsPerUnit`, reported when it moved by `minimumChange` or more.
    struct Scale: Sendable {
        var slot: String
        var file: String
        var zeroCounts: Double
        var countsPerUnit: Double
        var measurement: Measurement
        var pollSeconds: Int
        var minimumChange: Double
        var dashReplenishmentId: String?
    }

    /// What an input tells of its slot's supply in the alexa program (`buttons[].usage` / `buttons[].level`).
    struct SupplySensor: Sendable {
        enum Kind: Sendable {
            /// A press consumed this many units (Alexa's `InventoryUsageSensor`, a Count).
            case usage(unitsPerPress: Double)
            /// The level input's low and full mean these levels (Alexa's `InventoryLevelSensor`).
            case level(measurement: Measurement, low: Double, full: Double)
            /// A load cell's reading is the level (`alexa.scales`).
            case reading(measurement: Measurement)

            /// How a level of this sensor is measured; nil for a usage.
            var levelMeasurement: Measurement? {
                switch self {
                case .usage: nil
                case .level(let measurement, _, _), .reading(let measurement): measurement
                }
            }
        }
        var kind: Kind
        /// The slot's Dash Replenishment id (Amazon's console gives one per supply of the model), sent with each
        /// report so that the cloud can describe the unit to Alexa.
        var dashReplenishmentId: String?
    }

    /// How a level is measured, as Alexa's `InventoryLevelSensor` takes it.
    enum Measurement: Sendable, Equatable {
        case count
        case percentage
        case weight(unit: String)

        /// Alexa's `@type` of the value.
        var type: String {
            switch self {
            case .count: "Count"
            case .percentage: "Percentage"
            case .weight: "Weight"
            }
        }

        /// The unit, for a weight.
        var unit: String? { if case .weight(let unit) = self { unit } else { nil } }
    }

    /// Alexa's weight units (`Alexa.InventoryLevelSensor`'s `Weight`, in Amazon's message schema).
    static let weightUnits = ["KILOGRAM", "GRAM", "MILLIGRAM", "MICROGRAM", "METRIC_POUND", "POUND", "OUNCE", "DRAM"]

    /// The `alexa` object.
    static func parseAlexa(
        _ value: JSONValue?, device: Device?, configDirectory: String, stateDirectory: String?, problems: inout Problems
    ) -> AlexaSettings? {
        guard let value, var reader = ObjectReader(value, path: "alexa", problems: &problems) else { return nil }
        let cloudText = reader.string("cloudURL", problems: &problems)
        let cloudURL = url(cloudText, at: "alexa.cloudURL", problems: &problems)
        if let cloudURL, !cloudURL.text.hasPrefix("https://") {
            problems.add(
                "alexa.cloudURL", "must be an https URL: the unit proves itself with its certificate (mutual TLS)")
        }
        let unitId = reader.string("unitId", required: false, problems: &problems) ?? device?.serial
        if let unitId, !isValidIdentifier(unitId) {
            problems.add("alexa.unitId", "must be 1 to 64 characters of A-Z a-z 0-9 - + _")
        }
        let agentUID = stateDirectory.flatMap { StateDirectory.expectedAgentUID($0) }
        let certificate = reader.string("certificateFile", problems: &problems).map {
            POSIX.join(configDirectory, $0)
        }
        if let certificate {
            readPEM(
                certificate, key: "alexa.certificateFile", label: "CERTIFICATE", secret: false, agentUID: nil,
                problems: &problems)
        }
        let key = reader.string("keyFile", problems: &problems).map { POSIX.join(configDirectory, $0) }
        if let key {
            readPEM(
                key, key: "alexa.keyFile", label: "PRIVATE KEY", secret: true, agentUID: agentUID,
                problems: &problems)
        }
        var scales: [Scale] = []
        if let value = reader.value("scales", required: false, problems: &problems) {
            if case .array(let items) = value {
                for (index, item) in items.enumerated() {
                    if let scale = parseScale(item, path: "alexa.scales[\(index)]", problems: &problems) {
                        scales.append(scale)
                    }
                }
            } else {
                problems.add("alexa.scales", "must be an array")
            }
        }
        reader.reportUnknownKeys(problems: &problems)
        guard let cloudURL, let unitId, let certificate, let key else { return nil }
        return AlexaSettings(
            cloudURL: cloudURL, certificateFile: certificate, keyFile: key, unitId: unitId, scales: scales)
    }

    /// One `alexa.scales[]` entry.
    private static func parseScale(_ value: JSONValue, path: String, problems: inout Problems) -> Scale? {
        guard var reader = ObjectReader(value, path: path, problems: &problems) else { return nil }
        let slot = reader.string("slot", problems: &problems)
        if let slot, !isValidSlot(slot) {
            problems.add(reader.child("slot"), "must be 1 to 255 characters of A-Z a-z 0-9 - . _ ~")
        }
        let file = reader.string("file", problems: &problems)
        if let file, !file.hasPrefix("/") { problems.add(reader.child("file"), "must be an absolute path") }
        let zero = reader.number("zeroCounts", in: -1e12...1e12, required: true, problems: &problems)
        let perUnit = reader.number("countsPerUnit", in: -1e12...1e12, required: true, problems: &problems)
        if perUnit == 0 { problems.add(reader.child("countsPerUnit"), "must not be 0") }
        let (_, measurement) = readMeasurement(&reader, problems: &problems)
        let poll = reader.integer("pollSeconds", in: 1...86400, problems: &problems) ?? 300
        let change = reader.number("minimumChange", in: 0...1_000_000, problems: &problems) ?? 0
        let id = reader.string("dashReplenishmentId", required: false, problems: &problems)
        reader.reportUnknownKeys(problems: &problems)
        guard let slot, let file, file.hasPrefix("/"), let zero, let perUnit, perUnit != 0, let measurement else {
            return nil
        }
        return Scale(
            slot: slot, file: file, zeroCounts: zero, countsPerUnit: perUnit, measurement: measurement,
            pollSeconds: poll, minimumChange: change, dashReplenishmentId: id)
    }

    /// Checks a PEM file: readable, holding a block whose label ends in `label` (`CERTIFICATE`; `PRIVATE KEY`
    /// also matches `EC PRIVATE KEY` and `RSA PRIVATE KEY`). A `secret` one (the key) must be readable by its
    /// owner only and owned by the agent's user (`agentUID`, nil when it cannot be known). Problems never quote
    /// the file.
    private static func readPEM(
        _ path: String, key: String, label: String, secret: Bool, agentUID: UserID?, problems: inout Problems
    ) {
        guard let bytes = problems.readFile(path, key: key, missing: "no such file \(path)", limit: 64 * 1024)
        else { return }
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.containsText("-----BEGIN "), text.containsText("\(label)-----") else {
            problems.add(key, "\(path) is not a PEM file with a \(label) block")
            return
        }
        guard secret else { return }
        do {
            guard let info = try POSIX.status(path) else { return }
            if info.isReachableByOthers {
                problems.add(
                    key,
                    "\(path) holds the unit's private key and group or others may access it (mode \(info.octalPermissions)); chmod 600, owned by the agent's user"
                )
            } else if let agentUID, info.owner != agentUID {
                problems.add(
                    key,
                    "\(path) holds the unit's private key and is owned by uid \(info.owner), not the agent's user (uid \(agentUID)); chown \(StateDirectory.packageUser) \(path)"
                )
            }
        } catch {
            problems.add(key, error.message)
        }
    }

    /// `buttons[i].usage` / `buttons[i].level` of the alexa program, for an input of `kind`.
    static func parseSensor(
        _ reader: inout ObjectReader, kind: BoardFile.InputKind?, problems: inout Problems
    ) -> SupplySensor? {
        let usage = reader.value("usage", required: false, problems: &problems)
        let level = reader.value("level", required: false, problems: &problems)
        let id = reader.string("dashReplenishmentId", required: false, problems: &problems)
        if let id, id.isEmpty || id.utf8.count > 128 || id.containsText(" ") {
            problems.add(reader.child("dashReplenishmentId"), "must be 1 to 128 characters without spaces")
        }
        switch kind {
        case .button?:
            if level != nil {
                problems.add(reader.child("level"), "belongs to a level input; a button reports usage")
            }
            var units = 1.0
            if let usage, var usageReader = ObjectReader(usage, path: reader.child("usage"), problems: &problems) {
                units = usageReader.number("unitsPerPress", in: 1...1_000_000, problems: &problems) ?? 1
                usageReader.reportUnknownKeys(problems: &problems)
            }
            return SupplySensor(kind: .usage(unitsPerPress: units), dashReplenishmentId: id)
        case .level?:
            if usage != nil {
                problems.add(reader.child("usage"), "belongs to a button; a level input reports a level")
            }
            guard let level else {
                problems.add(
                    reader.child("level"),
                    "is required for a level input in program \"alexa\": the level its low and full stand for, such as {\"measurement\": \"Percentage\", \"low\": 10, \"full\": 100}"
                )
                return nil
            }
            guard var levelReader = ObjectReader(level, path: reader.child("level"), problems: &problems) else {
                return nil
            }
            let (name, measurement) = readMeasurement(&levelReader, problems: &problems)
            let range: ClosedRange<Double> = name == "Percentage" ? 0...100 : 0...1_000_000
            let low = levelReader.number("low", in: range, required: true, problems: &problems)
            let full = levelReader.number("full", in: range, required: true, problems: &problems)
            levelReader.reportUnknownKeys(problems: &problems)
            if measurement == .count {
                for (key, value) in [("low", low), ("full", full)] {
                    if let value, value != value.rounded() {
                        problems.add(levelReader.child(key), "must be a whole number for a Count")
                    }
                }
            }
            if let low, let full, low >= full {
                problems.add(levelReader.child("low"), "must be less than full (\(full))")
            }
            guard let measurement, let low, let full, low < full else { return nil }
            return SupplySensor(kind: .level(measurement: measurement, low: low, full: full), dashReplenishmentId: id)
        case nil:
            return nil
        }
    }

    /// `measurement` and `unit` of a level (`buttons[].level`, `alexa.scales[]`): the name as given, and the
    /// measurement when it is one Alexa takes (a Weight with one of Amazon's units).
    private static func readMeasurement(
        _ reader: inout ObjectReader, problems: inout Problems
    ) -> (name: String?, measurement: Measurement?) {
        let name = reader.string("measurement", problems: &problems)
        let unit = reader.string("unit", required: name == "Weight", problems: &problems)
        if name != "Weight", unit != nil { problems.add(reader.child("unit"), "is only for a Weight") }
        switch name {
        case "Count": return (name, .count)
        case "Percentage": return (name, .percentage)
        case "Weight":
            guard let unit else { return (name, nil) }
            guard weightUnits.contains(unit) else {
                problems.add(
                    reader.child("unit"), "must be one of \(weightUnits.joined(separator: ", ")), found \"\(unit)\"")
                return (name, nil)
            }
            return (name, .weight(unit: unit))
        case let other?:
            problems.add(
                reader.child("measurement"), "must be \"Count\", \"Percentage\" or \"Weight\", found \"\(other)\"")
            return (name, nil)
        case nil: return (name, nil)
        }
    }
}
