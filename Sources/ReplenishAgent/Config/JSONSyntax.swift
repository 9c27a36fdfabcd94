/// Strict JSON (RFC 8259) syntax, checked before a config or board file is decoded, so that a broken file is
/// named with the line and column of its first fault (`agent.json:3:14: a comma before "}" …`) and so that
/// what the decoder would let through is refused: a trailing comma, a comment, a single-quoted string, a
/// leading zero or `+` in a number, `NaN`. docs/configuration.md calls the config format strict JSON; this is where that is
/// enforced. Decoding itself stays `JSONValue.parse`.
struct JSONSyntax {
    /// Deeper than this is refused (the decoder stops at 512 as well).
    static let maximumDepth = 512

    /// What one walk over a document found: its first fault, or, for a valid document, the path of every key
    /// that appears again in the same object (`device.serial`, `buttons[0].slot`), in document order. JSON readers
    /// disagree on such a key (FoundationEssentials keeps the first, jq and Python the last), so the config and
    /// board files refuse it rather than let one reader see another file than the next. Keys are compared
    /// decoded (`"seri\u0061l"` is `serial`), as the decoder keys its objects.
    enum Outcome: Equatable, Sendable {
        case fault(Fault)
        case valid(duplicateKeys: [String])
    }

    /// Walks `bytes` once: one strict JSON value (with white space around it), and its duplicate keys.
    static func inspect(_ bytes: [UInt8]) -> Outcome {
        var checker = JSONSyntax(bytes: bytes)
        do throws(Fault) {
            // A UTF-8 byte order mark is tolerated (RFC 8259 section 8.1 lets a parser ignore it).
            if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { checker.index = 3 }
            try checker.skipSpace()
            guard checker.current != nil else { throw checker.fault("the file is empty: expected a JSON object") }
            try checker.value(depth: 0, path: "")
            try checker.skipSpace()
            if let byte = checker.current {
                throw checker.fault("\(describe(byte)) after the end of the document (one JSON value per file)")
            }
            return .valid(duplicateKeys: checker.duplicateKeys)
        } catch {
            return .fault(error)
        }
    }

    /// nil when `bytes` is one strict JSON value (with white space around it), else its first fault.
    static func check(_ bytes: [UInt8]) -> Fault? {
        if case .fault(let fault) = inspect(bytes) { return fault }
        return nil
    }

    private let bytes: [UInt8]
    private var index = 0
    private var duplicateKeys: [String] = []

    private init(bytes: [UInt8]) { self.bytes = bytes }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    /// The fault at `at` (default: the current byte), with its line and column.
    private func fault(_ message: String, at position: Int? = nil) -> Fault {
        let end = min(position ?? index, bytes.count)
        var line = 1
        var column = 1
        for byte in bytes[..<end] {
            if byte == 0x0A {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                // Continuation bytes of a UTF-8 sequence are not columns of their own.
                column += 1
            }
        }
        return Fault(line: line, column: column, message: message)
    }

    private mutating func skipSpace() throws(Fault) {
        while let byte = current {
            switch byte {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            case UInt8(ascii: "/")
            where index + 1 < bytes.count
                && (bytes[index + 1] == UInt8(ascii: "/") || bytes[index + 1] == UInt8(ascii: "*")):
                throw fault("a comment: strict JSON has none (remove it)")
            case UInt8(ascii: "#"):
                throw fault("a comment: strict JSON has none (remove it)")
            default: return
            }
        }
    }

    private mutating func value(depth: Int, path: String) throws(Fault) {
        guard depth < Self.maximumDepth else { throw fault("nested deeper than \(Self.maximumDepth) levels") }
        guard let byte = current else { throw fault("the file ends where a value was expected") }
        switch byte {
        case UInt8(ascii: "{"): try object(depth: depth + 1, path: path)
        case UInt8(ascii: "["): try array(depth: depth + 1, path: path)
        case UInt8(ascii: "\""): try string()
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        case UInt8(ascii: "'"): throw fault("a single-quoted string: JSON strings use double quotes")
        case UInt8(ascii: "+"), UInt8(ascii: "."): throw fault("a number must start with a digit or -")
        default: throw fault("\(Self.describe(byte)) where a value was expected")
        }
    }

    private mutating func object(depth: Int, path: String) throws(Fault) {
        index += 1  // {
        try skipSpace()
        if current == UInt8(ascii: "}") {
            index += 1
            return
        }
        var seen: Set<String> = []
        repeat {
            guard let byte = current else { throw fault("the file ends inside an object (a } is missing)") }
            guard byte == UInt8(ascii: "\"") else {
                if byte == UInt8(ascii: "'") { throw fault("a single-quoted key: JSON keys use double quotes") }
                throw fault("\(Self.describe(byte)) where a key in double quotes was expected")
            }
            let keyStart = index
            try string()
            let key = Self.decodedString(bytes[(keyStart + 1)..<(index - 1)])
            let child = path.isEmpty ? key : "\(path).\(key)"
            if !seen.insert(key).inserted { duplicateKeys.append(child) }
            try skipSpace()
            guard current == UInt8(ascii: ":") else {
                throw fault(
                    current.map { "\(Self.describe($0)) where a : after the key was expected" }
                        ?? "the file ends after a key (a : and a value are missing)")
            }
            index += 1
            try skipSpace()
            try value(depth: depth, path: child)
        } while try nextElement(closing: UInt8(ascii: "}"), inside: "an object")
    }

    private mutating func array(depth: Int, path: String) throws(Fault) {
        index += 1  // [
        try skipSpace()
        if current == UInt8(ascii: "]") {
            index += 1
            return
        }
        var element = 0
        repeat {
            guard current != nil else { throw fault("the file ends inside an array (a ] is missing)") }
            try value(depth: depth, path: "\(path)[\(element)]")
            element += 1
        } while try nextElement(closing: UInt8(ascii: "]"), inside: "an array")
    }

    /// After an element of an object or array: true at a comma (another element follows), false past the
    /// `closing` bracket; a trailing comma, the end of the file or anything else is the fault.
    private mutating func nextElement(closing: UInt8, inside container: String) throws(Fault) -> Bool {
        let close = Self.describe(closing, quoted: false)
        try skipSpace()
        switch current {
        case UInt8(ascii: ","):
            let comma = index
            index += 1
            try skipSpace()
            if current == closing {
                throw fault("a comma before \(close): strict JSON allows no trailing comma (remove it)", at: comma)
            }
            return true
        case closing?:
            index += 1
            return false
        case nil: throw fault("the file ends inside \(container) (a \(close) is missing)")
        case let byte?: throw fault("\(Self.describe(byte)) where a , or \(close) was expected (a comma missing?)")
        }
    }

    /// A string from its opening quote: no raw control characters, only JSON's escapes, valid UTF-8.
    private mutating func string() throws(Fault) {
        let start = index
        index += 1  // "
        while let byte = current {
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return
            case UInt8(ascii: "\\"):
                index += 1
                guard let escaped = current else { break }
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                    UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    index += 1
                case UInt8(ascii: "u"):
                    index += 1
                    for _ in 0..<4 {
                        guard let digit = current, Self.isHexDigit(digit) else {
                            throw fault("\\u must be followed by four hex digits")
                        }
                        index += 1
                    }
                default:
                    throw fault("\\\(Self.describe(escaped, quoted: false)) is not a JSON escape", at: index - 1)
                }
            case 0x00..<0x20:
                throw fault(
                    byte == 0x0A
                        ? "a line break inside a string (a closing \" is missing?)"
                        : "a control character inside a string (write it as an escape)")
            case 0x80...:
                let length = Self.utf8Length(bytes, at: index)
                guard length > 0 else { throw fault("a byte that is not UTF-8") }
                index += length
            default:
                index += 1
            }
        }
        throw fault("the file ends inside a string (a closing \" is missing)", at: start)
    }

    private mutating func number() throws(Fault) {
        if current == UInt8(ascii: "-") { index += 1 }
        guard let first = current, Self.isDigit(first) else {
            throw fault("a number needs a digit after -")
        }
        index += 1
        if first == UInt8(ascii: "0"), let next = current, Self.isDigit(next) {
            throw fault("a number must not have a leading zero")
        }
        while let byte = current, Self.isDigit(byte) { index += 1 }
        if current == UInt8(ascii: ".") {
            index += 1
            guard let byte = current, Self.isDigit(byte) else { throw fault("a number needs digits after its .") }
            while let byte = current, Self.isDigit(byte) { index += 1 }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard let byte = current, Self.isDigit(byte) else { throw fault("a number needs digits after its e") }
            while let byte = current, Self.isDigit(byte) { index += 1 }
        }
    }

    private mutating func literal(_ word: String) throws(Fault) {
        for expected in word.utf8 {
            guard current == expected else { throw fault("expected \(word)") }
            index += 1
        }
    }
}
