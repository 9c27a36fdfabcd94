import Foundation
import Logging
import PostgresNIO

extension CloudStore {
    /// A claim by a customer's phone (the agent's docs/protocol.md, "Claiming a unit"), applied in one
    /// transaction: a wrong proof, a used nonce or another customer's unit changes nothing. A new binding tells
    /// Alexa of the unit (AddOrUpdateReport) and of its levels.
    public func claim(unit: String, customer: String, nonce: String, proof: String, now: Date) async throws -> Bool {
        try await transaction { connection in
            guard let known = try await Self.unit(unit, connection: connection, lock: true, logger: logger) else {
                throw CloudError(.notFound, "unit \(unit) is not registered")
            }
            guard let key = ClaimProof(keyHex: known.setupKey),
                key.verifies(proof, unit: unit, customer: customer, nonce: nonce)
            else { throw CloudError(.forbidden, "the proof does not match the label's key") }
            let used = try await connection.query(
                "SELECT count(*) FROM claim_nonces WHERE unit = \(unit) AND nonce = \(nonce)", logger: logger
            ).decode(Int.self).reduce(0, +)
            guard used == 0 else {
                throw CloudError(.conflict, "this claim's nonce was used already: make a new claim")
            }
            if let owner = known.customer, owner != customer {
                throw CloudError(.conflict, "unit \(unit) is claimed by another customer")
            }
            try await connection.query(
                "INSERT INTO claim_nonces (unit, nonce) VALUES (\(unit), \(nonce))", logger: logger)
            guard known.customer == nil else { return true }
            try await connection.query(
                "INSERT INTO bindings (unit, customer) VALUES (\(unit), \(customer))", logger: logger)
            if let model = catalogue.models[known.model] {
                let endpoint = AlexaMessage.endpoint(unit: unit, model: model, manufacturer: catalogue.manufacturer)
                try await Self.queue(
                    AlexaMessage.addOrUpdateReport(endpoint: endpoint), customer: customer, now: now,
                    connection: connection,
                    logger: logger)
                let properties = try await Self.levelProperties(
                    unit: unit, model: model, connection: connection, logger: logger)
                if !properties.isEmpty {
                    try await Self.queue(
                        AlexaMessage.changeReport(unit: unit, properties: properties, periodic: true),
                        customer: customer, now: now, connection: connection, logger: logger)
                }
            }
            return true
        }
    }

    /// The customer releases a unit (unbinding): Alexa is told with a DeleteReport, and the unit's queued events
    /// for that customer go.
    public func release(unit: String, customer: String, now: Date) async throws {
        try await transaction { connection in
            guard let known = try await Self.unit(unit, connection: connection, lock: true, logger: logger) else {
                throw CloudError(.notFound, "unit \(unit) is not registered")
            }
            guard known.customer == customer else {
                throw CloudError(.forbidden, "unit \(unit) is not this customer's")
            }
            try await connection.query("DELETE FROM bindings WHERE unit = \(unit)", logger: logger)
            try await connection.query(
                "DELETE FROM events WHERE customer = \(customer) AND endpoint = \(unit)", logger: logger)
            try await Self.queue(
                AlexaMessage.deleteReport(unit: unit), customer: customer, now: now, connection: connection,
                logger: logger)
        }
    }

    /// The units bound to a customer, with their models.
    public func units(of customer: String) async throws -> [(unit: String, model: String)] {
        var units: [(unit: String, model: String)] = []
        let rows = try await client.query(
            "SELECT u.unit, u.model FROM bindings b JOIN units u USING (unit) WHERE b.customer = \(customer) ORDER BY u.unit",
            logger: logger)
        for try await (unit, model) in rows.decode((String, String).self) { units.append((unit, model)) }
        return units
    }

    /// The unit's levels as Alexa context properties, one per level slot of its model that has reported one.
    public func levelProperties(unit: String, model: Catalogue.Model) async throws -> [JSON] {
        try await client.withConnection { connection in
            try await Self.levelProperties(unit: unit, model: model, connection: connection, logger: logger)
        }
    }

    static func levelProperties(
        unit: String, model: Catalogue.Model, connection: PostgresConnection, logger: Logger
    ) async throws -> [JSON] {
        var properties: [JSON] = []
        let rows = try await connection.query(
            "SELECT slot, level::text, sampled_at FROM levels WHERE unit = \(unit) ORDER BY slot", logger: logger)
        for try await (slotName, levelText, sampledAt) in rows.decode((String, String, Date).self) {
            guard let slot = model.slots.first(where: { $0.slot == slotName && $0.sensor == .level }),
                let level = try? JSON.parse(levelText)
            else { continue }
            properties.append(
                AlexaMessage.levelProperty(slot: slot, level: level, sampledAt: Timestamp.string(sampledAt)))
        }
        return properties
    }

    /// The customer's event-gateway tokens, from AcceptGrant or a refresh.
    public func storeGrant(customer: String, tokens: LWATokens, now: Date) async throws {
        let expiresAt = now.addingTimeInterval(TimeInterval(tokens.expiresIn))
        try await client.query(
            """
            INSERT INTO grants (customer, access_token, refresh_token, expires_at, updated_at)
            VALUES (\(customer), \(tokens.accessToken), \(tokens.refreshToken), \(expiresAt), \(now))
            ON CONFLICT (customer) DO UPDATE SET access_token = EXCLUDED.access_token,
              refresh_token = EXCLUDED.refresh_token, expires_at = EXCLUDED.expires_at, updated_at = EXCLUDED.updated_at
            """, logger: logger)
    }

    /// The customer disabled the skill (the gateway's SKILL_DISABLED_EXCEPTION): their tokens and queued events
    /// go. Their units stay theirs: enabling the skill again finds them at discovery.
    public func dropGrant(customer: String) async throws {
        try await transaction { connection in
            try await connection.query("DELETE FROM grants WHERE customer = \(customer)", logger: logger)
            try await connection.query("DELETE FROM events WHERE customer = \(customer)", logger: logger)
        }
    }

    /// Queues the day's update of every level of every bound unit (Amazon asks for one a day at least): once
    /// per UTC day, whichever copy's schedule comes first. Returns the number of units updated, 0 when the day's
    /// update was queued already.
    public func queueDailyUpdate(now: Date) async throws -> Int {
        let day = String(Timestamp.string(now).prefix(10))
        return try await transaction { connection in
            let inserted = try await connection.query(
                "INSERT INTO daily_updates (day) VALUES (\(day)::date) ON CONFLICT DO NOTHING RETURNING 1",
                logger: logger
            ).decode(Int.self).reduce(0, +)
            guard inserted > 0 else { return 0 }
            var bound: [(String, String, String)] = []
            let rows = try await connection.query(
                "SELECT b.unit, b.customer, u.model FROM bindings b JOIN units u USING (unit) WHERE NOT u.revoked ORDER BY b.unit",
                logger: logger)
            for try await row in rows.decode((String, String, String).self) { bound.append(row) }
            var updated = 0
            for (unit, customer, modelName) in bound {
                guard let model = catalogue.models[modelName] else { continue }
                let properties = try await Self.levelProperties(
                    unit: unit, model: model, connection: connection, logger: logger)
                guard !properties.isEmpty else { continue }
                try await Self.queue(
                    AlexaMessage.changeReport(unit: unit, properties: properties, periodic: true), customer: customer,
                    now: now, connection: connection, logger: logger)
                updated += 1
            }
            return updated
        }
    }
}
