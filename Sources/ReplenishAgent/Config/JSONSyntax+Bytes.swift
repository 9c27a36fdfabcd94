/// The byte-level pieces of `JSONSyntax`: what a byte is (a digit, a hex digit, the start of a UTF-8 sequence),
/// how a byte is named in a message, and the decoded text of a string the walk accepted.
extension JSONSyntax {
    /// The text of a string's contents that `string()` accepted (escapes decoded; a lone surrogate escape is
    /// U+FFFD, as the decoder makes it).
    static func decodedString(_ contents: ArraySlice<UInt8>) -> String {
        var utf8: [UInt8] = []
        var index = contents.startIndex
        func hex4(at start: Int) -> UInt32? {
            guard start + 4 <= contents.endIndex else { return nil }
            var value: UInt32 = 0
            for byte in contents[start..<start + 4] {
                guard let digit = hexDigitValue(byte) else { return nil }
                value = value << 4 | UInt32(digit)
            }
            return value
        }
        while index < contents.endIndex {
            let byte = contents[index]
            index += 1
            guard byte == UInt8(ascii: "\\") else {
                utf8.append(byte)
                continue
            }
            let escaped = contents[index]
            index += 1
            switch escaped {
            case UInt8(ascii: "b"): utf8.append(0x08)
            case UInt8(ascii: "f"): utf8.append(0x0C)
            case UInt8(ascii: "n"): utf8.append(0x0A)
            case UInt8(ascii: "r"): utf8.append(0x0D)
            case UInt8(ascii: "t"): utf8.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = hex4(at: index).flatMap { Unicode.Scalar($0) }
                let high = hex4(at: index) ?? 0
                index += 4
                // A high surrogate followed by `\u` and a low one is one scalar.
                if (0xD800..<0xDC00).contains(high), index + 6 <= contents.endIndex,
                    contents[index] == UInt8(ascii: "\\"), contents[index + 1] == UInt8(ascii: "u"),
                    let low = hex4(at: index + 2), (0xDC00..<0xE000).contains(low)
                {
                    scalar = Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
                    index += 6
                }
                utf8 += Array(String(Character(scalar ?? "\u{FFFD}")).utf8)
            default: utf8.append(escaped)  // \" \\ \/
            }
        }
        return String(decoding: utf8, as: UTF8.self)
    }

    static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    static func isHexDigit(_ byte: UInt8) -> Bool { hexDigitValue(byte) != nil }

    static func hexDigitValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The length of the well-formed UTF-8 sequence at `index` (its first byte 0x80 or above), 0 if there is none.
    static func utf8Length(_ bytes: [UInt8], at index: Int) -> Int {
        let first = bytes[index]
        let length: Int
        let lowest: UInt32
        switch first {
        case 0xC2...0xDF: (length, lowest) = (2, 0x80)
        case 0xE0...0xEF: (length, lowest) = (3, 0x800)
        case 0xF0...0xF4: (length, lowest) = (4, 0x10000)
        default: return 0
        }
        guard index + length <= bytes.count else { return 0 }
        var scalar = UInt32(first) & (0xFF >> (length + 1))
        for byte in bytes[(index + 1)..<(index + length)] {
            guard byte & 0xC0 == 0x80 else { return 0 }
            scalar = scalar << 6 | UInt32(byte & 0x3F)
        }
        guard scalar >= lowest, scalar <= 0x10FFFF, !(0xD800...0xDFFF).contains(scalar) else { return 0 }
        return length
    }

    /// A byte for a message: `'x'`, or its hex value when it is not printable ASCII.
    static func describe(_ byte: UInt8, quoted: Bool = true) -> String {
        guard (0x21...0x7E).contains(byte) else {
            let digits = Array("0123456789ABCDEF")
            return "byte 0x\(digits[Int(byte >> 4)])\(digits[Int(byte & 0x0F)])"
        }
        let text = String(UnicodeScalar(byte))
        return quoted ? "'\(text)'" : text
    }
}
