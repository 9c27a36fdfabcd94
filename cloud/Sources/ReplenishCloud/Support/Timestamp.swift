import Foundation

/// UTC times as Alexa's messages carry them: ISO 8601 with a `Z`, at most three decimals.
public enum Timestamp {
    /// The time as `2026-11-29T10:00:00.123Z` (Foundation's ISO 8601 style).
    public static func string(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt))
    }

    /// Whether a text is a UTC time Alexa's schema takes: `YYYY-MM-DDThh:mm:ss[.f{1,3}]Z`, and a real time.
    public static func isValid(_ text: String) -> Bool {
        guard text.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z/) != nil else { return false }
        return date(text) != nil
    }

    /// The time a valid text names.
    public static func date(_ text: String) -> Date? {
        let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt)
        return (try? withFraction.parse(text)) ?? (try? Date.ISO8601FormatStyle(timeZone: .gmt).parse(text))
    }
}
