import Foundation
import Logging
import PostgresNIO

/// The service's state, all of it in PostgreSQL: each request is one transaction, so copies of the service
/// behind one database answer as one would. A unit's row is locked while its report or claim is applied, so
/// the same report arriving at two copies is applied once.
public struct CloudStore: Sendable {
    public let client: PostgresClient
    public let catalogue: Catalogue
    let logger: Logger

    public init(client: PostgresClient, catalogue: Catalogue, logger: Logger) {
        self.client = client
        self.catalogue = catalogue
        self.logger = logger
    }

    /// One transaction; the error thrown inside it comes out as itself (postgres-nio wraps it).
    func transaction<T: Sendable>(
        _ body: (PostgresConnection) async throws -> sending T
    ) async throws -> T {
        try await Self.transaction(client: client, logger: logger, body)
    }

    static func transaction<T: Sendable>(
        client: PostgresClient, logger: Logger, _ body: (PostgresConnection) async throws -> sending T
    ) async throws -> T {
        do {
            return try await client.withTransaction(logger: logger, body)
        } catch let error as PostgresTransactionError {
            if let inner = error.closureError { throw inner }
            throw error
        }
    }

    /// What the database knows of a unit.
    public struct UnitRecord: Sendable, Equatable {
        public var unit: String
        public var setupKey: String
        public var model: String
        public var revoked: Bool
        public var customer: String?
    }

    /// What a report's answer says.
    public struct Acknowledgement: Sendable, Equatable {
        public var sequence: Int64
        public var claimed: Bool
        /// False for a duplicate: a report applied before, acknowledged again.
        public var applied: Bool
    }

    /// The factory registers a unit, its label's key and its model. The same unit again with the same key and
    /// model changes nothing; with another key it is refused (a relabelled unit is a new unit).
    public func register(unit: String, setupKey: String, model: String) async throws -> Bool {
        guard catalogue.models[model] != nil else {
            throw CloudError(.badRequest, "model \(model) is not in the catalogue")
        }
        guard ClaimProof(keyHex: setupKey) != nil, setupKey.utf8.allSatisfy({ !(0x41...0x46).contains($0) }) else {
            throw CloudError(.badRequest, "the setup key must be 32 lowercase hex digits")
        }
        return try await transaction { connection in
            try await connection.query(
                "INSERT INTO units (unit, setup_key, model) VALUES (\(unit), \(setupKey), \(model)) ON CONFLICT DO NOTHING",
                logger: logger)
            guard let known = try await Self.unit(unit, connection: connection, lock: false, logger: logger) else {
                throw CloudError(.notFound, "unit \(unit) was not registered")
            }
            guard known.setupKey == setupKey, known.model == model else {
                throw CloudError(.conflict, "unit \(unit) is registered already with another key or model")
            }
            return true
        }
    }

    public func unit(_ unit: String) async throws -> UnitRecord? {
        try await client.withConnection { connection in
            try await Self.unit(unit, connection: connection, lock: false, logger: logger)
        }
    }

    static func unit(_ unit: String, connection: PostgresConnection, lock: Bool, logger: Logger) async throws
        -> UnitRecord?
    {
        // The unit's row first (locked when asked), then its binding in a statement of its own: read after the
        // lock is granted, it sees a claim or a release that committed while this one waited.
        let query: PostgresQuery =
            lock
            ? "SELECT setup_key, model, revoked FROM units WHERE unit = \(unit) FOR UPDATE"
            : "SELECT setup_key, model, revoked FROM units WHERE unit = \(unit)"
        var record: UnitRecord?
        for try await (key, model, revoked) in try await connection.query(query, logger: logger).decode(
            (String, String, Bool).self)
        {
            record = UnitRecord(unit: unit, setupKey: key, model: model, revoked: revoked, customer: nil)
        }
        guard var found = record else { return nil }
        for try await customer in try await connection.query(
            "SELECT customer FROM bindings WHERE unit = \(unit)", logger: logger
        ).decode(String.self) { found.customer = customer }
        return found
    }

    /// The factory (or the maker's support) revokes a unit's certificate: its calls are refused from then on.
    public func revoke(unit: String) async throws {
        try await client.query("UPDATE units SET revoked = true WHERE unit = \(unit)", logger: logger)
    }

    /// Applies a report once: a (unit, stream, sequence) at or below the stream's last is a duplicate,
    /// acknowledged and not applied again. The report's events for the unit's customer are queued in the same
    /// transaction, so an applied report always has its events and a duplicate never makes a second one.
    public func apply(_ report: UnitReport, receivedAt now: Date) async throws -> Acknowledgement {
        try await transaction { connection in
            guard let known = try await Self.unit(report.unit, connection: connection, lock: true, logger: logger)
            else {
                throw CloudError(.notFound, "unit \(report.unit) is not registered")
            }
            guard !known.revoked else { throw CloudError(.forbidden, "unit \(report.unit)'s certificate is revoked") }
            var last: Int64 = 0
            for try await value in try await connection.query(
                "SELECT last_sequence FROM streams WHERE unit = \(report.unit) AND stream = \(report.stream)",
                logger: logger
            ).decode(Int64.self) { last = value }
            let claimed = known.customer != nil
            guard report.sequence > last else {
                return Acknowledgement(sequence: report.sequence, claimed: claimed, applied: false)
            }
            try await connection.query(
                """
                INSERT INTO streams (unit, stream, last_sequence) VALUES (\(report.unit), \(report.stream), \(report.sequence))
                ON CONFLICT (unit, stream) DO UPDATE SET last_sequence = EXCLUDED.last_sequence
                """, logger: logger)
            let body = Self.text(of: report)
            try await connection.query(
                "INSERT INTO reports (unit, stream, sequence, body) VALUES (\(report.unit), \(report.stream), \(report.sequence), \(body)::jsonb)",
                logger: logger)
            let fallback = report.madeAt ?? Timestamp.string(now)
            var changed: [JSON] = []
            let model = catalogue.models[known.model]
            for supply in report.supplies {
                let sampledAt = supply.at ?? fallback
                if let level = supply.level {
                    let text = level.text
                    try await connection.query(
                        """
                        INSERT INTO levels (unit, slot, level, sampled_at)
                        VALUES (\(report.unit), \(supply.slot), \(text)::jsonb, \(Timestamp.date(sampledAt) ?? now))
                        ON CONFLICT (unit, slot) DO UPDATE SET level = EXCLUDED.level, sampled_at = EXCLUDED.sampled_at
                        """, logger: logger)
                }
                // A slot the model does not have is kept (its level above) but not told to Alexa.
                guard let customer = known.customer, let slot = model?.slots.first(where: { $0.slot == supply.slot })
                else { continue }
                if let count = supply.usage, slot.sensor == .usage {
                    let event = AlexaMessage.inventoryConsumed(
                        unit: report.unit, slot: slot, count: count, sampledAt: sampledAt)
                    try await Self.queue(event, customer: customer, now: now, connection: connection, logger: logger)
                }
                if let level = supply.level, slot.sensor == .level {
                    changed.append(AlexaMessage.levelProperty(slot: slot, level: level, sampledAt: sampledAt))
                }
            }
            if let customer = known.customer, !changed.isEmpty, let model {
                let instances = Set(changed.compactMap { $0["instance"]?.string })
                let unchanged = try await Self.levelProperties(
                    unit: report.unit, model: model, connection: connection, logger: logger
                ).filter { !instances.contains($0["instance"]?.string ?? "") }
                let event = AlexaMessage.changeReport(
                    unit: report.unit, properties: changed, periodic: report.daily, context: unchanged)
                try await Self.queue(event, customer: customer, now: now, connection: connection, logger: logger)
            }
            return Acknowledgement(sequence: report.sequence, claimed: claimed, applied: true)
        }
    }

    static func text(of report: UnitReport) -> String {
        let supplies: [JSON] = report.supplies.map { supply in
            var line: [String: JSON] = ["slot": .string(supply.slot)]
            if let count = supply.usage { line["usage"] = ["@type": "Count", "value": .number(Double(count))] }
            if let level = supply.level { line["level"] = level }
            if let at = supply.at { line["at"] = .string(at) }
            if let id = supply.dashReplenishmentId { line["dashReplenishmentId"] = .string(id) }
            return .object(line)
        }
        return JSON.object([
            "daily": .bool(report.daily), "madeAt": report.madeAt.map(JSON.string) ?? .null,
            "supplies": .array(supplies),
        ]).text
    }

    /// Queues an event for a customer's gateway (`EventSender` sends it).
    static func queue(
        _ event: JSON, customer: String, now: Date, connection: PostgresConnection, logger: Logger
    ) async throws {
        guard let messageId = event.at("event.header.messageId")?.string,
            let name = event.at("event.header.name")?.string,
            let endpoint = event.at("event.endpoint.endpointId")?.string
                ?? event.at("event.payload.endpoints")?.array?.first?["endpointId"]?.string
        else { throw CloudError(.badRequest, "an event without a header or an endpoint") }
        let text = event.text
        try await connection.query(
            """
            INSERT INTO events (customer, endpoint, message_id, name, event, created_at, next_attempt_at)
            VALUES (\(customer), \(endpoint), \(messageId), \(name), \(text)::jsonb, \(now), \(now))
            """,
            logger: logger)
    }
}
