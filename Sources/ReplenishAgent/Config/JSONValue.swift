import FoundationEssentials

/// A parsed JSON document, kept generic so that the config and board files can be checked key by key and
/// every problem reported at once (a `Decodable` struct stops at the first). Parsing itself is
/// FoundationEssentials' `JSONDecoder`.
enum JSONValue: Decodable, Equatable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// Parses a JSON document, with a secret-free message when it is not JSON.
    static func parse(_ bytes: [UInt8]) throws(AgentError) -> JSONValue {
        do {
            return try JSONDecoder().decode(JSONValue.self, from: Data(bytes))
        } catch {
            throw AgentError(.invalidInput, "not valid JSON")
        }
    }

    var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

extension JSONValue {
    /// The path of every key that appears again in the same object (`device.serial`, `buttons[0].slot`), in
    /// document order. JSON readers disagree on such a key (FoundationEssentials keeps the first, jq and Python
    /// the last), so the config and board files refuse it rather than let one reader see another file than the
    /// next. Keys are compared decoded (`"seri\u0061l"` is `serial`), as Swift strings, the way `parse` keys its
    /// objects. `bytes` should have passed `parse`: this only walks the structure, and stops at anything else.
    static func duplicateKeys(in bytes: [UInt8]) -> [String] {
        var scanner = DuplicateKeyScanner(bytes: bytes)
        scanner.value(path: "", depth: 0)
        return scanner.duplicates
    }
}

/// Walks a JSON document's objects and arrays, collecting the paths of keys seen twice in one object.
private struct DuplicateKeyScanner {
    let bytes: [UInt8]
    var index = 0
    var duplicates: [String] = []

    /// Deeper than JSONDecoder goes (512): nothing valid is cut short.
    private static let maximumDepth = 1024

    init(bytes: [UInt8]) { self.bytes = bytes }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipSpace() {
        while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
    }

    mutating func value(path: String, depth: Int) {
        skipSpace()
        guard let byte = current, depth < Self.maximumDepth else { return }
        switch byte {
        case UInt8(ascii: "{"): object(path: path, depth: depth + 1)
        case UInt8(ascii: "["): array(path: path, depth: depth + 1)
        case UInt8(ascii: "\""): _ = string()
        default:
            // A number, true, false or null: up to the next delimiter, at least one byte.
            index += 1
            while let next = current, !Self.isDelimiter(next) { index += 1 }
        }
    }

    private mutating func object(path: String, depth: Int) {
        index += 1  // {
        var seen: Set<String> = []
        while true {
            skipSpace()
            guard let byte = current else { return }
            if byte == UInt8(ascii: "}") {
                index += 1
                return
            }
            guard byte == UInt8(ascii: "\"") else {
                index += 1  // a comma (or anything else: never stuck)
                continue
            }
            let key = string()
            let child = path.isEmpty ? key : "\(path).\(key)"
            if !seen.insert(key).inserted { duplicates.append(child) }
            skipSpace()
            if current == UInt8(ascii: ":") { index += 1 }
            value(path: child, depth: depth)
        }
    }

    private mutating func array(path: String, depth: Int) {
        index += 1  // [
        var element = 0
        while true {
            skipSpace()
            guard let byte = current else { return }
            switch byte {
            case UInt8(ascii: "]"):
                index += 1
                return
            case UInt8(ascii: ","):
                index += 1
                element += 1
            default:
                let start = index
                value(path: "\(path)[\(element)]", depth: depth)
                if index == start { index += 1 }
            }
        }
    }

    /// The decoded text of the string that starts at `index` (its opening quote); `index` ends past its closing
    /// quote.
    private mutating func string() -> String {
        index += 1  // "
        var utf8: [UInt8] = []
        while let byte = current {
            index += 1
            if byte == UInt8(ascii: "\"") { break }
            guard byte == UInt8(ascii: "\\"), let escaped = current else {
                utf8.append(byte)
                continue
            }
            index += 1
            switch escaped {
            case UInt8(ascii: "b"): utf8.append(0x08)
            case UInt8(ascii: "f"): utf8.append(0x0C)
            case UInt8(ascii: "n"): utf8.append(0x0A)
            case UInt8(ascii: "r"): utf8.append(0x0D)
            case UInt8(ascii: "t"): utf8.append(0x09)
            case UInt8(ascii: "u"): utf8 += unicodeEscape()
            default: utf8.append(escaped)  // \" \\ \/
            }
        }
        return String(decoding: utf8, as: UTF8.self)
    }

    /// The UTF-8 of a `\uXXXX` escape (its `\u` already read), joining a surrogate pair; U+FFFD for a lone
    /// surrogate, as the decoder does.
    private mutating func unicodeEscape() -> [UInt8] {
        guard let high = hex4() else { return Array("\u{FFFD}".utf8) }
        var scalar = Unicode.Scalar(high)
        if (0xD800..<0xDC00).contains(high), index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
            bytes[index + 1] == UInt8(ascii: "u")
        {
            let saved = index
            index += 2
            if let low = hex4(), (0xDC00..<0xE000).contains(low) {
                scalar = Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
            } else {
                index = saved
            }
        }
        return Array(String(Character(scalar ?? "\u{FFFD}")).utf8)
    }

    private mutating func hex4() -> UInt32? {
        guard index + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for byte in bytes[index..<index + 4] {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
        }
        index += 4
        return value
    }

    private static func isDelimiter(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: ",") || byte == UInt8(ascii: "]") || byte == UInt8(ascii: "}") || byte == 0x20
            || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }
}
