/// A unit's report (`POST /v1/units/{unit}/reports`, the agent's docs/protocol.md): its stream and sequence,
/// and each slot's usage since its last acknowledged report or its latest level. Parsing refuses what Alexa's
/// inventory sensors could not carry, naming the first wrong field.
public struct UnitReport: Sendable, Equatable {
    /// One slot's line of a report.
    public struct Supply: Sendable, Equatable {
        public var slot: String
        public var dashReplenishmentId: String?
        /// Units used since the slot's last acknowledged report (a whole Count of at least 1).
        public var usage: Int?
        /// The latest level, as Alexa's `InventoryLevelSensor` `level` value.
        public var level: JSON?
        /// When the unit sampled it (UTC), when its clock is trusted.
        public var at: String?
    }

    public var unit: String
    public var stream: String
    public var sequence: Int64
    public var daily: Bool
    public var madeAt: String?
    public var supplies: [Supply]

    static let weightUnits = ["KILOGRAM", "GRAM", "MILLIGRAM", "MICROGRAM", "METRIC_POUND", "POUND", "OUNCE", "DRAM"]

    /// Reads a report for `unit` (the identity its certificate proves).
    public init(parsing body: JSON, unit: String) throws(CloudError) {
        func refuse(_ text: String) -> CloudError { CloudError(.badRequest, text) }
        guard body.isObject else { throw refuse("the report must be a JSON object") }
        guard body["unit"]?.string == unit else { throw refuse("unit must be \(unit), the certificate's unit") }
        guard let stream = body["stream"]?.string, stream.utf8.count == 16,
            stream.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { throw refuse("stream must be 16 lowercase hex digits") }
        guard let number = body["sequence"]?.number, number >= 1, number == number.rounded(), number < 1e15 else {
            throw refuse("sequence must be a whole number from 1")
        }
        guard case .bool(let daily)? = body["daily"] else { throw refuse("daily must be true or false") }
        let madeAt = body["madeAt"].flatMap { $0 == .null ? nil : $0 }
        if let madeAt, !(madeAt.string.map(Timestamp.isValid) ?? false) {
            throw refuse("madeAt must be an ISO 8601 UTC time")
        }
        guard let lines = body["supplies"]?.array else { throw refuse("supplies must be an array") }
        var supplies: [Supply] = []
        for (index, line) in lines.enumerated() {
            supplies.append(try Self.supply(line, at: "supplies[\(index)]"))
        }
        if supplies.isEmpty, !daily { throw refuse("supplies must not be empty, except in the daily report") }
        self.unit = unit
        self.stream = stream
        self.sequence = Int64(number)
        self.daily = daily
        self.madeAt = madeAt?.string
        self.supplies = supplies
    }

    static func supply(_ line: JSON, at path: String) throws(CloudError) -> Supply {
        func refuse(_ text: String) -> CloudError { CloudError(.badRequest, text) }
        guard let slot = line["slot"]?.string, !slot.isEmpty, slot.utf8.count <= 64 else {
            throw refuse("\(path).slot is required (1 to 64 characters)")
        }
        let usage = line["usage"].flatMap { $0 == .null ? nil : $0 }
        let level = line["level"].flatMap { $0 == .null ? nil : $0 }
        guard (usage == nil) != (level == nil) else { throw refuse("\(path) must have one of usage and level") }
        var count: Int?
        if let usage {
            guard usage["@type"]?.string == "Count", let value = usage["value"]?.number, value >= 1,
                value == value.rounded(), value < 1e9
            else { throw refuse("\(path).usage must be a Count of at least 1") }
            count = Int(value)
        }
        if let level { try checkLevel(level, at: "\(path).level") }
        let at = line["at"].flatMap { $0 == .null ? nil : $0 }
        if let at, !(at.string.map(Timestamp.isValid) ?? false) {
            throw refuse("\(path).at must be an ISO 8601 UTC time")
        }
        let dashId = line["dashReplenishmentId"].flatMap { $0 == .null ? nil : $0 }
        if let dashId, dashId.string?.isEmpty ?? true {
            throw refuse("\(path).dashReplenishmentId must be a non-empty string")
        }
        return Supply(slot: slot, dashReplenishmentId: dashId?.string, usage: count, level: level, at: at?.string)
    }

    /// An `InventoryLevelSensor` level as Amazon's schema takes it: a whole Count, a Percentage from 0 to 100, or
    /// a Weight in one of the schema's units.
    static func checkLevel(_ level: JSON, at path: String) throws(CloudError) {
        func refuse(_ text: String) -> CloudError { CloudError(.badRequest, text) }
        guard level.isObject, let value = level["value"]?.number, value >= 0 else {
            throw refuse("\(path).value must be a number of at least 0")
        }
        switch level["@type"]?.string {
        case "Count":
            guard value == value.rounded(), level["unit"] == nil else {
                throw refuse("\(path): a Count is a whole number without a unit")
            }
        case "Percentage":
            guard value <= 100, level["unit"] == nil else {
                throw refuse("\(path): a Percentage is from 0 to 100, without a unit")
            }
        case "Weight":
            guard let unit = level["unit"]?.string, weightUnits.contains(unit) else {
                throw refuse("\(path).unit must be one of \(weightUnits.joined(separator: ", "))")
            }
        default:
            throw refuse("\(path).@type must be Count, Percentage or Weight")
        }
    }
}
