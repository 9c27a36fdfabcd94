/// Validation of the ISO 8601 date-times DRS bodies carry.
///
/// Accepted: `YYYY-MM-DDTHH:MM:SS`, optional fraction, then `Z` or `±HH:MM` (RFC 3339's profile of ISO 8601,
/// upper-case `T` and `Z`). A bare date, a missing zone or missing seconds is refused.
///
/// A check of the shape, not a date parser: Foundation's `Date.ISO8601FormatStyle` accepts `2015-02-30`, hour
/// 25 and trailing characters (measured with Swift 6.3.1), and the emulator exists to catch exactly such
/// agent mistakes.
enum ISO8601DateTime {
    static func isValid(_ text: String) -> Bool {
        let c = Array(text.utf8)
        func digits(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= c.count else { return nil }
            var value = 0
            for i in range {
                guard c[i] >= UInt8(ascii: "0"), c[i] <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(c[i] - UInt8(ascii: "0"))
            }
            return value
        }
        func char(_ i: Int, _ expected: Character) -> Bool {
            i < c.count && c[i] == expected.asciiValue!
        }
        guard let year = digits(0..<4), char(4, "-"), let month = digits(5..<7), char(7, "-"),
            let day = digits(8..<10), char(10, "T"), let hour = digits(11..<13), char(13, ":"),
            let minute = digits(14..<16), char(16, ":"), let second = digits(17..<19)
        else { return false }
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour <= 23,
            minute <= 59, second <= 60
        else { return false }
        var i = 19
        if char(i, ".") {
            i += 1
            let start = i
            while i < c.count, c[i] >= UInt8(ascii: "0"), c[i] <= UInt8(ascii: "9") { i += 1 }
            guard i > start else { return false }
        }
        if char(i, "Z") {
            return i + 1 == c.count
        }
        guard char(i, "+") || char(i, "-"), let offsetHours = digits(i + 1..<i + 3), char(i + 3, ":"),
            let offsetMinutes = digits(i + 4..<i + 6)
        else { return false }
        return i + 6 == c.count && offsetHours <= 23 && offsetMinutes <= 59
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }
}
