import FoundationEssentials

/// One report of the unit's supplies to the maker's cloud (program alexa; docs/protocol.md, "Reports to the
/// maker's cloud"): `POST {cloudURL}/v1/units/{unit}/reports`. A report is made once, written to `reports.json`
/// before it is sent, and resent unchanged until the cloud acknowledges its sequence number; the cloud applies
/// each (stream, sequence) once, so a lost acknowledgement never counts a press twice.
struct SupplyReport: Codable, Sendable, Equatable {
    /// A quantity as Alexa's inventory sensors take it: `{"@type": "Count", "value": 3}`, a Weight with its unit.
    struct Quantity: Codable, Sendable, Equatable {
        var type: String
        var value: Double
        var unit: String?

        enum CodingKeys: String, CodingKey {
            case type = "@type"
            case value, unit
        }
    }

    /// What one slot's sensor tells: units consumed since the slot's last acknowledged report (a usage sensor),
    /// or the slot's latest level (a level sensor).
    struct Supply: Codable, Sendable, Equatable {
        var slot: String
        var dashReplenishmentId: String?
        var usage: Quantity?
        var level: Quantity?
        /// When the level was read or the last of the usage happened (UTC), when the unit's clock is trusted.
        var at: String?
    }

    var unit: String
    /// The state directory's stream (random, made with `reports.json`): a unit whose flash was wiped starts a new
    /// stream, and its sequence numbers start again at 1 without the cloud taking them as duplicates.
    var stream: String
    var sequence: Int
    /// The daily report, sent even when nothing changed (Alexa wants each level at least once a day).
    var daily: Bool
    /// When the report was made (UTC), when the unit's clock is trusted.
    var madeAt: String?
    var supplies: [Supply]
}

/// What the cloud answers to a report (`200`), and to `GET {cloudURL}/v1/units/{unit}`.
struct CloudAnswer: Decodable, Sendable {
    /// The report's sequence number, once the cloud has it (applied now, or earlier: a duplicate).
    var acknowledged: Int?
    /// Whether a customer has claimed the unit (`POST /v1/claims` from the phone).
    var claimed: Bool?
}
