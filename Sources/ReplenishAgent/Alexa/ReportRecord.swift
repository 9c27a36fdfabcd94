/// What `reports.json` holds (program alexa): the unit's reports not yet acknowledged, as facts that survive a
/// power cut. Usage is summed per slot until a report carries it; a level keeps only its latest reading; the report
/// out (`inFlight`) is frozen, sequence number and content, until the cloud acknowledges that number.
///
/// A value with no I/O: `SupplyReporter` writes it (on the disk lane) after each change and before each send.
///
/// Format (see `StateFormat` for the rule): version 1.
struct ReportRecord: Codable, Sendable, Equatable, StateFormat {
    static let formatVersion = 1

    /// A level slot's latest reading.
    struct Level: Codable, Sendable, Equatable {
        var value: Double
        /// The wall-clock time of the reading (seconds since 1970), when the clock was trusted.
        var at: Double?
        /// A report still has to carry it (it changed since the last report was made).
        var unsent: Bool
    }

    var version = ReportRecord.formatVersion
    /// This state directory's stream of reports (16 hex digits, random, made with the file).
    var stream: String
    /// The sequence number of the next report made (the first is 1).
    var nextSequence = 1
    /// The report made and not yet acknowledged: resent unchanged until it is.
    var inFlight: SupplyReport?
    /// Units consumed per slot since the report in flight was made.
    var usage: [String: Double] = [:]
    /// When the last of each slot's usage happened (wall clock), when the clock was trusted.
    var usageAt: [String: Double] = [:]
    var levels: [String: Level] = [:]
    /// When the cloud last acknowledged a daily report (wall clock), for the next one across restarts.
    var lastDailyAt: Double?
    /// What the cloud last said of the claim (nil: never heard).
    var claimed: Bool?

    init(stream: String) { self.stream = stream }

    /// A new stream's id from `random` (16 lowercase hex digits).
    static func newStream<R: RandomNumberGenerator>(using random: inout R) -> String {
        let value = random.next()
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// Whether a report is waiting to be sent or acknowledged (a change not yet reported, or one out).
    var hasUnreported: Bool { inFlight != nil || !usage.isEmpty || levels.values.contains { $0.unsent } }

    /// The slot's sensor was pressed: `units` consumed at `wallTime` (nil when the clock is not trusted).
    mutating func recordUsage(slot: String, units: Double, at wallTime: Double?) {
        usage[slot, default: 0] += units
        if let wallTime { usageAt[slot] = wallTime }
    }

    /// The slot's level was read: `value` at `wallTime` (nil when the clock is not trusted).
    mutating func recordLevel(slot: String, value: Double, at wallTime: Double?) {
        levels[slot] = Level(value: value, at: wallTime, unsent: true)
    }

    /// The report to send now: the one in flight, or a new one of everything not yet reported (every level when
    /// `daily`), which becomes the one in flight; nil when there is nothing to report. `sensors`: each slot's
    /// sensor, for the measurement and the Dash Replenishment id. `wallTime`: now, when the clock is trusted.
    mutating func report(
        unit: String, sensors: [String: AgentConfig.SupplySensor], daily: Bool, wallTime: Double?
    ) -> SupplyReport? {
        if let inFlight { return inFlight }
        let levelSlots = levels.filter { daily || $0.value.unsent }.keys.sorted()
        guard !usage.isEmpty || !levelSlots.isEmpty || daily else { return nil }
        var supplies: [SupplyReport.Supply] = []
        for slot in usage.keys.sorted() {
            guard let units = usage[slot] else { continue }
            supplies.append(
                .init(
                    slot: slot, dashReplenishmentId: sensors[slot]?.dashReplenishmentId,
                    usage: .init(type: "Count", value: units), at: usageAt[slot].map(ISO8601.format)))
        }
        for slot in levelSlots {
            // Reported now, or never: a slot whose level sensor left the config has no measurement to send it in.
            levels[slot]?.unsent = false
            guard let level = levels[slot], let measurement = sensors[slot]?.kind.levelMeasurement else { continue }
            supplies.append(
                .init(
                    slot: slot, dashReplenishmentId: sensors[slot]?.dashReplenishmentId,
                    level: .init(type: measurement.type, value: level.value, unit: measurement.unit),
                    at: level.at.map(ISO8601.format)))
        }
        let made = SupplyReport(
            unit: unit, stream: stream, sequence: nextSequence, daily: daily, madeAt: wallTime.map(ISO8601.format),
            supplies: supplies)
        nextSequence += 1
        usage = [:]
        usageAt = [:]
        inFlight = made
        return made
    }

    /// The cloud acknowledged `sequence` at `wallTime`: the report in flight is done when it is that one.
    /// Returns the report it acknowledged.
    mutating func acknowledged(_ sequence: Int, claimed: Bool?, at wallTime: Double?) -> SupplyReport? {
        if let claimed { self.claimed = claimed }
        guard let done = inFlight, done.sequence == sequence else { return nil }
        inFlight = nil
        if done.daily, let wallTime { lastDailyAt = wallTime }
        return done
    }
}
