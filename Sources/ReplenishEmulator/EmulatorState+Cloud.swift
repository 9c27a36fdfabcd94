import Foundation

/// The maker's cloud as a unit of program alexa meets it (the agent's docs/protocol.md, "Reports to the maker's
/// cloud"): reports applied once per (unit, stream, sequence), the claim by a customer's phone proven with the
/// label's key, and what the unit asks of its claim. The unit's identity is its certificate's subject, which the
/// TLS terminator in front (mutual TLS; a load balancer's mTLS verify mode in production) passes in
/// `X-Amzn-Mtls-Clientcert-Subject`, as AWS's Application Load Balancer does.
struct CloudUnit: Sendable, Codable {
    /// The label's setup key (32 lowercase hex digits), as the factory registered it.
    var setupKeyHex: String
    var claimedBy: String?
    /// Claim nonces already used for this unit (a replayed claim is refused).
    var usedNonces: Set<String> = []
    /// The last sequence number applied, per stream.
    var lastApplied: [String: Int] = [:]
    /// Every report applied, in order, and how many duplicates were acknowledged without being applied.
    var applied: [JSONValue] = []
    var duplicates = 0
    /// The unit's certificate was revoked (`POST /admin/units/{unit}/revoke`): its calls are refused with 403.
    var revoked = false
}

extension EmulatorState {
    static let subjectHeader = "X-Amzn-Mtls-Clientcert-Subject"

    /// The unit a call comes from: the CN of the certificate subject the terminator passed, which must be the
    /// unit of the path; otherwise the refusal.
    func callingUnit(_ request: EmulatorRequest, unit: String) throws(Refusal) -> CloudUnit {
        guard let subject = request.header(Self.subjectHeader), !subject.isEmpty else {
            throw Refusal(.message(401, "No client certificate: the unit's calls come over mutual TLS"))
        }
        let commonName = subject.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            .first { $0.hasPrefix("CN=") }.map { String($0.dropFirst(3)) }
        guard commonName == unit else {
            throw Refusal(.message(403, "The certificate (\(subject)) is not unit \(unit)'s"))
        }
        guard let known = cloudUnits[unit] else {
            throw Refusal(.message(404, "Unit \(unit) is not registered"))
        }
        guard !known.revoked else { throw Refusal(.message(403, "Unit \(unit)'s certificate is revoked")) }
        return known
    }

    /// `POST /v1/units/{unit}/reports`.
    mutating func cloudReport(_ request: EmulatorRequest, unit: String, now: Date) throws(Refusal) -> EmulatorResponse {
        var known = try callingUnit(request, unit: unit)
        guard request.mediaType == "application/json" else {
            throw Refusal(.message(415, "Content-Type must be application/json"))
        }
        guard let body = try? JSONValue.parse(request.body), case .object = body else {
            throw Refusal(.message(400, "The report must be a JSON object"))
        }
        let report = try Self.checkedReport(body, unit: unit)
        let last = known.lastApplied[report.stream] ?? 0
        if report.sequence <= last {
            known.duplicates += 1
        } else {
            known.lastApplied[report.stream] = report.sequence
            known.applied.append(
                .obj([
                    "stream": .string(report.stream), "sequence": .number(Double(report.sequence)),
                    "daily": .bool(report.daily), "supplies": report.supplies,
                    "receivedAt": .number(now.timeIntervalSince1970.rounded()),
                ]))
        }
        cloudUnits[unit] = known
        return .json(
            200, .obj(["acknowledged": .number(Double(report.sequence)), "claimed": .bool(known.claimedBy != nil)]))
    }

    /// What a report must hold; the refusal names the first field that is wrong.
    static func checkedReport(_ body: JSONValue, unit: String) throws(Refusal) -> (
        stream: String, sequence: Int, daily: Bool, supplies: JSONValue
    ) {
        func refuse(_ text: String) -> Refusal { Refusal(.message(400, text)) }
        guard body["unit"]?.stringValue == unit else { throw refuse("unit must be \(unit), the path's unit") }
        guard let stream = body["stream"]?.stringValue, stream.count == 16,
            stream.allSatisfy({ $0.isHexDigit && !$0.isUppercase })
        else { throw refuse("stream must be 16 lowercase hex digits") }
        guard let number = body["sequence"]?.numberValue, number >= 1, number == number.rounded(), number < 1e15
        else { throw refuse("sequence must be a whole number from 1") }
        guard case .bool(let daily)? = body["daily"] else { throw refuse("daily must be true or false") }
        if let madeAt = body["madeAt"], madeAt != .null, !(madeAt.stringValue.map(ISO8601DateTime.isValid) ?? false) {
            throw refuse("madeAt must be an ISO 8601 UTC time")
        }
        guard case .array(let supplies)? = body["supplies"] else { throw refuse("supplies must be an array") }
        for (index, supply) in supplies.enumerated() {
            let at = "supplies[\(index)]"
            guard let slot = supply["slot"]?.stringValue, !slot.isEmpty else { throw refuse("\(at).slot is required") }
            let usage = supply["usage"].flatMap { $0 == .null ? nil : $0 }
            let level = supply["level"].flatMap { $0 == .null ? nil : $0 }
            guard (usage == nil) != (level == nil) else { throw refuse("\(at) must have one of usage and level") }
            if let usage {
                guard usage["@type"]?.stringValue == "Count", let value = usage["value"]?.numberValue, value > 0,
                    value == value.rounded()
                else { throw refuse("\(at).usage must be a Count of at least 1") }
            }
            if let level { try checkedLevel(level, at: "\(at).level") }
        }
        if supplies.isEmpty, !daily { throw refuse("supplies must not be empty, except in the daily report") }
        return (stream, Int(number), daily, .array(supplies))
    }

    /// An `InventoryLevelSensor` level as Amazon's schema takes it.
    static func checkedLevel(_ level: JSONValue, at path: String) throws(Refusal) {
        func refuse(_ text: String) -> Refusal { Refusal(.message(400, text)) }
        guard let value = level["value"]?.numberValue, value >= 0 else {
            throw refuse("\(path).value must be a number of at least 0")
        }
        switch level["@type"]?.stringValue {
        case "Count":
            guard value == value.rounded(), level["unit"] == nil else {
                throw refuse("\(path): a Count is a whole number without a unit")
            }
        case "Percentage":
            guard value <= 100, level["unit"] == nil else {
                throw refuse("\(path): a Percentage is from 0 to 100, without a unit")
            }
        case "Weight":
            let units = ["KILOGRAM", "GRAM", "MILLIGRAM", "MICROGRAM", "METRIC_POUND", "POUND", "OUNCE", "DRAM"]
            guard let unit = level["unit"]?.stringValue, units.contains(unit) else {
                throw refuse("\(path).unit must be one of \(units.joined(separator: ", "))")
            }
        default:
            throw refuse("\(path).@type must be Count, Percentage or Weight")
        }
    }

    /// `GET /v1/units/{unit}`.
    func cloudUnitState(_ request: EmulatorRequest, unit: String) throws(Refusal) -> EmulatorResponse {
        let known = try callingUnit(request, unit: unit)
        return .json(200, .obj(["unit": .string(unit), "claimed": .bool(known.claimedBy != nil)]))
    }

    /// `POST /v1/claims` `{"unit","customer","nonce","proof"}`: the customer's phone, signed in to the maker's
    /// app, proves the label's key: proof = HMAC-SHA256(key, "replenish-claim-v1\n" + unit + "\n" + customer +
    /// "\n" + nonce), lowercase hex. A wrong proof changes nothing.
    mutating func cloudClaim(_ request: EmulatorRequest) throws(Refusal) -> EmulatorResponse {
        guard let body = try? JSONValue.parse(request.body), case .object = body else {
            throw Refusal(.message(400, "The claim must be a JSON object"))
        }
        guard let unit = body["unit"]?.stringValue, let customer = body["customer"]?.stringValue, !customer.isEmpty,
            customer.count <= 128, let nonce = body["nonce"]?.stringValue, nonce.count == 32,
            nonce.allSatisfy({ $0.isHexDigit }), let proof = body["proof"]?.stringValue
        else {
            throw Refusal(
                .message(400, "A claim needs unit, customer (1 to 128 characters), nonce (32 hex digits) and proof"))
        }
        guard var known = cloudUnits[unit] else { throw Refusal(.message(404, "Unit \(unit) is not registered")) }
        let expected: String
        do {
            expected = try PairingProof(serial: unit, keyHex: known.setupKeyHex).claimProof(
                unit: unit, customer: customer, nonce: nonce)
        } catch { throw Refusal(.message(500, "The proof could not be checked: \(error)")) }
        guard Self.constantTimeEqual(proof, expected) else {
            throw Refusal(.message(403, "The proof does not match the label's key"))
        }
        guard !known.usedNonces.contains(nonce) else {
            throw Refusal(.message(409, "This claim's nonce was used already: make a new claim"))
        }
        if let owner = known.claimedBy, owner != customer {
            throw Refusal(.message(409, "Unit \(unit) is claimed by another customer"))
        }
        known.usedNonces.insert(nonce)
        known.claimedBy = customer
        cloudUnits[unit] = known
        return .json(200, .obj(["unit": .string(unit), "customer": .string(customer), "claimed": true]))
    }

    /// `POST /admin/units` `{"unit","setupKey"}`: the factory registers a unit and its label's key.
    mutating func adminRegisterUnit(_ request: EmulatorRequest) -> EmulatorResponse {
        guard let body = try? JSONValue.parse(request.body), let unit = body["unit"]?.stringValue, !unit.isEmpty,
            let key = body["setupKey"]?.stringValue, key.count == 32,
            key.allSatisfy({ $0.isHexDigit && !$0.isUppercase })
        else { return .message(400, "Give unit and setupKey (32 lowercase hex digits)") }
        cloudUnits[unit, default: CloudUnit(setupKeyHex: key)].setupKeyHex = key
        return .json(200, .obj(["unit": .string(unit), "registered": true]))
    }

    /// `POST /admin/units/{unit}/revoke`: the unit's certificate is revoked.
    mutating func adminRevokeUnit(unit: String) -> EmulatorResponse {
        guard cloudUnits[unit] != nil else { return .message(404, "Unit \(unit) is not registered") }
        cloudUnits[unit]?.revoked = true
        return .json(200, .obj(["unit": .string(unit), "revoked": true]))
    }

    /// `GET /admin/units/{unit}`: the reports applied, the duplicates acknowledged, the claim.
    func adminUnit(unit: String) -> EmulatorResponse {
        guard let known = cloudUnits[unit] else { return .message(404, "Unit \(unit) is not registered") }
        return .json(
            200,
            .obj([
                "unit": .string(unit), "claimedBy": known.claimedBy.map(JSONValue.string) ?? .null,
                "applied": .array(known.applied), "duplicates": .number(Double(known.duplicates)),
                "revoked": .bool(known.revoked),
            ]))
    }

    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let (x, y) = (Array(a.utf8), Array(b.utf8))
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
