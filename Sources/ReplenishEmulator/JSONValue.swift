import Foundation

/// A JSON document as the emulator reads and writes it.
///
/// Parsing and writing are Foundation's `JSONDecoder` and `JSONEncoder`; this type only gives the emulator a
/// tree it can inspect field by field (to answer each malformed field with its own error) that tells a
/// boolean from a number. Answers are written with sorted keys, so they are stable. Foundation's decoder is
/// more lenient than RFC 8259 in two ways (measured with Swift 6.3.1): a trailing comma is accepted, and of a
/// repeated key the first is kept. The agent writes every JSON body with `JSONEncoder`, so neither can hide
/// an agent mistake.
enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    /// Members in the order they were built (parsed objects: sorted by key); written with sorted keys.
    case object([Member])

    /// One member of an object.
    struct Member: Sendable, Equatable {
        var key: String
        var value: JSONValue
    }

    /// Builds an object from key/value pairs, keeping their order.
    static func obj(_ pairs: KeyValuePairs<String, JSONValue>) -> JSONValue {
        .object(pairs.map { Member(key: $0.key, value: $0.value) })
    }

    /// Builds an object from a dictionary, with the keys sorted so that answers are stable.
    static func sortedObject(_ dictionary: [String: JSONValue]) -> JSONValue {
        .object(dictionary.keys.sorted().map { Member(key: $0, value: dictionary[$0]!) })
    }

    /// The value of the first member named `key`, when this is an object.
    subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    var numberValue: Double? {
        if case .number(let n) = self { return n }
        return nil
    }

    /// The compact JSON text of this value, written by Foundation's `JSONEncoder`.
    var serialized: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding a tree of strings, finite numbers, booleans and nulls cannot fail; the fallback is never used.
        guard let data = try? encoder.encode(self) else { return "null" }
        return String(decoding: data, as: UTF8.self)
    }

    /// Parses a complete JSON text (RFC 8259) with Foundation's `JSONDecoder`.
    static func parse(_ bytes: [UInt8]) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    }

    static func parse(_ text: String) throws -> JSONValue {
        try parse(Array(text.utf8))
    }
}

extension JSONValue: Codable {
    /// Any member name, for objects whose keys are data (slot ids, parameter names).
    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    // The order of the attempts matters: `JSONDecoder` refuses `true` as a number and `1` as a boolean, so a
    // boolean and a number are told apart exactly.
    init(from decoder: any Decoder) throws {
        if let object = try? decoder.container(keyedBy: Key.self) {
            // Sorted so that a parsed object has a stable order; nothing reads meaning into JSON key order.
            self = .object(
                try object.allKeys.sorted { $0.stringValue < $1.stringValue }.map { key in
                    Member(key: key.stringValue, value: try object.decode(JSONValue.self, forKey: key))
                })
            return
        }
        if var array = try? decoder.unkeyedContainer() {
            var items: [JSONValue] = []
            while !array.isAtEnd { items.append(try array.decode(JSONValue.self)) }
            self = .array(items)
            return
        }
        let value = try decoder.singleValueContainer()
        if value.decodeNil() {
            self = .null
        } else if let bool = try? value.decode(Bool.self) {
            self = .bool(bool)
        } else if let number = try? value.decode(Double.self) {
            self = .number(number)
        } else {
            self = .string(try value.decode(String.self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        if case .array(let items) = self {
            var array = encoder.unkeyedContainer()
            for item in items { try array.encode(item) }
        } else if case .object(let members) = self {
            var object = encoder.container(keyedBy: Key.self)
            for member in members { try object.encode(member.value, forKey: Key(stringValue: member.key)) }
        } else {
            var value = encoder.singleValueContainer()
            switch self {
            case .bool(let bool): try value.encode(bool)
            case .string(let string): try value.encode(string)
            // Whole numbers (token lifetimes, counters, status codes) are written without a fraction.
            case .number(let number)
            where number.isFinite && number == number.rounded() && abs(number) < 9_007_199_254_740_992:
                try value.encode(Int64(number))
            case .number(let number) where number.isFinite: try value.encode(number)
            // null, and a number JSON cannot hold (NaN, an infinity).
            default: try value.encodeNil()
            }
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral {
    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int) { self = .number(Double(value)) }
    init(booleanLiteral value: Bool) { self = .bool(value) }
}
