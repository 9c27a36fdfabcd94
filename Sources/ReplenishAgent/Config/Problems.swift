/// Collects every problem found in a config or board file, each naming the key path (`lwa.tokenURL`,
/// `buttons[0].slot`) or the file, so `check-config` can print them all, one a line.
struct Problems: Sendable {
    private(set) var lines: [String] = []
    /// Every key the reading asked for, with its path (`device.serial`, `buttons[0].slot`), present or not: what
    /// `reportUnknownKeys` accepts. The configuration reference (docs/configuration.md) is checked against it.
    private(set) var keysRead: Set<String> = []
    var isEmpty: Bool { lines.isEmpty }

    mutating func add(_ path: String, _ message: String) { lines.append("\(path): \(message)") }

    mutating func read(keys: some Sequence<String>) { keysRead.formUnion(keys) }

    /// The bytes of the regular file `path`, or nil with the problem added under `key`: `missing` when there is
    /// no such file, the read's own message otherwise (not a regular file, too large, unreadable).
    mutating func readFile(_ path: String, key: String, missing: String, limit: Int = 1 << 20) -> [UInt8]? {
        do {
            guard let bytes = try POSIX.readFile(path, limit: limit) else {
                add(key, missing)
                return nil
            }
            return bytes
        } catch {
            add(key, error.message)
            return nil
        }
    }
}

/// Reads one JSON object's keys with path-named problems: unknown keys, missing required keys and wrong
/// types are recorded, never thrown, so one pass finds everything.
struct ObjectReader {
    let path: String
    private let fields: [String: JSONValue]
    private var known: Set<String> = []

    /// nil (with a problem recorded) when `value` is not an object.
    init?(_ value: JSONValue?, path: String, problems: inout Problems) {
        guard case .object(let fields) = value else {
            problems.add(
                path.isEmpty ? "(top level)" : path, "must be an object, found \(value?.typeName ?? "nothing")")
            return nil
        }
        self.path = path
        self.fields = fields
    }

    func child(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// The raw value of `key` (marking it known), recording a problem when it is required and missing.
    mutating func value(_ key: String, required: Bool, problems: inout Problems) -> JSONValue? {
        known.insert(key)
        guard let value = fields[key], value != .null else {
            if required { problems.add(child(key), "is required") }
            return nil
        }
        return value
    }

    mutating func string(_ key: String, required: Bool = true, problems: inout Problems) -> String? {
        guard let value = value(key, required: required, problems: &problems) else { return nil }
        guard case .string(let text) = value else {
            problems.add(child(key), "must be a string, found \(value.typeName)")
            return nil
        }
        return text
    }

    mutating func bool(_ key: String, problems: inout Problems) -> Bool? {
        guard let value = value(key, required: false, problems: &problems) else { return nil }
        guard case .bool(let flag) = value else {
            problems.add(child(key), "must be true or false, found \(value.typeName)")
            return nil
        }
        return flag
    }

    /// An integer in `range`, or nil with a problem.
    mutating func integer(_ key: String, in range: ClosedRange<Int>, problems: inout Problems) -> Int? {
        guard let value = value(key, required: false, problems: &problems) else { return nil }
        guard case .number(let number) = value, number.rounded() == number,
            number >= Double(range.lowerBound), number <= Double(range.upperBound)
        else {
            problems.add(child(key), "must be a whole number from \(range.lowerBound) to \(range.upperBound)")
            return nil
        }
        return Int(number)
    }

    /// A finite number in `range`, or nil with a problem.
    mutating func number(
        _ key: String, in range: ClosedRange<Double>, required: Bool = false, problems: inout Problems
    ) -> Double? {
        guard let value = value(key, required: required, problems: &problems) else { return nil }
        guard case .number(let number) = value, number.isFinite, range.contains(number) else {
            problems.add(child(key), "must be a number from \(range.lowerBound) to \(range.upperBound)")
            return nil
        }
        return number
    }

    /// Records every key of the object that no reader asked for.
    func reportUnknownKeys(problems: inout Problems) {
        problems.read(keys: known.map(child))
        for key in fields.keys.sorted() where !known.contains(key) {
            problems.add(child(key), "unknown key")
        }
    }
}
