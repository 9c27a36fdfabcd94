/// A board file: which GPIO backend the device uses and which lines carry its inputs and LEDs.
struct BoardFile: Sendable {
    enum Backend: String, Sendable { case gpiod, simulated }
    enum Bias: String, Sendable {
        case asIs = "as-is"
        case disabled
        case pullUp = "pull-up"
        case pullDown = "pull-down"
    }
    enum InputKind: String, Sendable { case button, level }

    struct Input: Sendable {
        var name: String
        var kind: InputKind
        /// Line offset on the chip (gpiod backend only).
        var line: Int?
        var activeLow: Bool
        var bias: Bias
        var debounceMilliseconds: Int
        var longPressMilliseconds: Int
        /// Level inputs: how long the level must stay active (low supply) before it counts.
        var minimumActiveMilliseconds: Int = 10_000
        /// Level inputs: how long it must stay inactive (refilled) before it can count again.
        var minimumInactiveMilliseconds: Int = 60_000
    }

    struct Output: Sendable, Equatable {
        var name: String
        var line: Int?
        var activeLow: Bool
    }

    var name: String
    var backend: Backend
    /// Chip name, path or label (gpiod backend only).
    var chip: String?
    var inputs: [Input]
    var outputs: [Output]

    func input(named name: String) -> Input? { inputs.first { $0.name == name } }
}

extension BoardFile {
    /// Decodes and checks a board file, recording every problem against `file`.
    static func parse(_ json: JSONValue, file: String, problems: inout Problems) -> BoardFile? {
        var local = Problems()
        guard var top = ObjectReader(json, path: "", problems: &local) else {
            for line in local.lines { problems.add(file, line) }
            return nil
        }
        let name = top.string("name", required: false, problems: &local) ?? "unnamed board"
        let backendName = top.string("backend", problems: &local)
        let backend = backendName.flatMap(Backend.init(rawValue:))
        if let backendName, backend == nil {
            local.add("backend", "must be \"gpiod\" or \"simulated\", found \"\(backendName)\"")
        }
        let chip = top.string("chip", required: backend == .gpiod, problems: &local)
        if let chip, chip.isEmpty || chip.utf8.count > 256 { local.add("chip", "must be 1 to 256 characters") }
        var inputs: [Input] = []
        var outputs: [Output] = []
        var names: Set<String> = []
        func checkName(_ name: String?, at path: String) {
            guard let name else { return }
            if !isValidName(name) { local.add(path, "must be 1 to 32 characters of a-z A-Z 0-9 - _") }
            if !names.insert(name).inserted { local.add(path, "\"\(name)\" is used twice") }
        }
        // One line of the chip is one input or one LED: the kernel grants a line to one request once, and a
        // button wired to an LED's line would read the LED. The first user of each line, for the message.
        var lineUsers: [Int: String] = [:]
        func checkLine(_ line: Int?, of entry: String, named name: String?) {
            guard let line else { return }
            if let first = lineUsers[line] {
                local.add(
                    "\(entry).line",
                    "line \(line) is also used by \(first); each input and LED needs a line of its own")
            } else {
                lineUsers[line] = name.map { "\(entry) (\($0))" } ?? entry
            }
        }
        if case .array(let items)? = top.value("inputs", required: true, problems: &local) {
            if items.isEmpty { local.add("inputs", "must name at least one input") }
            for (index, item) in items.enumerated() {
                let path = "inputs[\(index)]"
                guard var reader = ObjectReader(item, path: path, problems: &local) else { continue }
                let inputName = reader.string("name", problems: &local)
                checkName(inputName, at: reader.child("name"))
                let kindName = reader.string("kind", required: false, problems: &local) ?? "button"
                let kind = InputKind(rawValue: kindName)
                if kind == nil { local.add(reader.child("kind"), "must be \"button\" or \"level\"") }
                let line = reader.integer("line", in: 0...1023, problems: &local)
                if backend == .gpiod && line == nil { local.add(reader.child("line"), "is required on a gpiod board") }
                checkLine(line, of: path, named: inputName)
                let biasName = reader.string("bias", required: false, problems: &local) ?? "as-is"
                let bias = Bias(rawValue: biasName)
                if bias == nil {
                    local.add(reader.child("bias"), "must be \"as-is\", \"disabled\", \"pull-up\" or \"pull-down\"")
                }
                let activeLow = reader.bool("activeLow", problems: &local) ?? false
                let debounce = reader.integer("debounceMs", in: 0...1000, problems: &local) ?? 30
                let longPress = reader.integer("longPressMs", in: 500...60000, problems: &local) ?? 5000
                let minimumActive = reader.integer("minActiveMs", in: 0...3_600_000, problems: &local) ?? 10_000
                let minimumInactive = reader.integer("minInactiveMs", in: 0...86_400_000, problems: &local) ?? 60_000
                reader.reportUnknownKeys(problems: &local)
                if let inputName, let kind, let bias {
                    inputs.append(
                        Input(
                            name: inputName, kind: kind, line: line, activeLow: activeLow, bias: bias,
                            debounceMilliseconds: debounce, longPressMilliseconds: longPress,
                            minimumActiveMilliseconds: minimumActive, minimumInactiveMilliseconds: minimumInactive))
                }
            }
        } else if top.value("inputs", required: false, problems: &local) != nil {
            local.add("inputs", "must be an array")
        }
        if let value = top.value("outputs", required: false, problems: &local) {
            if case .array(let items) = value {
                for (index, item) in items.enumerated() {
                    guard var reader = ObjectReader(item, path: "outputs[\(index)]", problems: &local) else { continue }
                    let outputName = reader.string("name", problems: &local)
                    checkName(outputName, at: reader.child("name"))
                    let line = reader.integer("line", in: 0...1023, problems: &local)
                    if backend == .gpiod && line == nil {
                        local.add(reader.child("line"), "is required on a gpiod board")
                    }
                    checkLine(line, of: reader.path, named: outputName)
                    let activeLow = reader.bool("activeLow", problems: &local) ?? false
                    reader.reportUnknownKeys(problems: &local)
                    if let outputName { outputs.append(Output(name: outputName, line: line, activeLow: activeLow)) }
                }
            } else {
                local.add("outputs", "must be an array")
            }
        }
        top.reportUnknownKeys(problems: &local)
        for line in local.lines { problems.add(file, line) }
        problems.read(keys: local.keysRead.map { "board:\($0)" })
        guard local.isEmpty, let backend else { return nil }
        return BoardFile(name: name, backend: backend, chip: chip, inputs: inputs, outputs: outputs)
    }

    static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 32
            && name.utf8.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
    }
}

/// ASCII letters and digits.
func isAlphanumeric(_ byte: UInt8) -> Bool {
    (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
}
