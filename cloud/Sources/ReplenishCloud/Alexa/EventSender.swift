import Foundation
import Logging
import PostgresNIO

/// Sends the queued events to the gateway and deletes each one the gateway accepted. Events are locked with
/// `FOR UPDATE SKIP LOCKED` while they are sent, so copies of the service never send the same event at once; an
/// event whose answer was lost is sent again under the same message id. A customer's token is refreshed (the
/// grant's row locked) when it has less than five minutes left, or when the gateway says it is not valid.
public struct EventSender: Sendable {
    let store: CloudStore
    let gateway: any EventGateway
    let lwa: any LoginWithAmazon
    let logger: Logger

    /// What one pass did.
    public struct Pass: Sendable, Equatable {
        public var sent = 0
        public var retried = 0
        public var dropped = 0
    }

    /// An event not sent within a day is dropped: its customer never gave a grant, or Alexa refused it for a day.
    static let maximumAge: TimeInterval = 86_400

    public init(store: CloudStore, gateway: any EventGateway, lwa: any LoginWithAmazon, logger: Logger) {
        self.store = store
        self.gateway = gateway
        self.lwa = lwa
        self.logger = logger
    }

    /// Sends what is due, in batches of `batch`, until nothing due is left unlocked.
    public func sendDue(now: @Sendable () -> Date, batch: Int = 10) async throws -> Pass {
        var total = Pass()
        while true {
            let (pass, taken) = try await sendBatch(now: now(), batch: batch)
            total.sent += pass.sent
            total.retried += pass.retried
            total.dropped += pass.dropped
            if taken < batch { return total }
        }
    }

    func sendBatch(now: Date, batch: Int) async throws -> (Pass, Int) {
        try await CloudStore.transaction(client: store.client, logger: logger) { connection in
            var due: [(Int64, String, String, String, Int32, Date)] = []
            let rows = try await connection.query(
                """
                SELECT id, customer, name, event::text, attempts, created_at FROM events
                WHERE next_attempt_at <= \(now) ORDER BY id LIMIT \(batch) FOR UPDATE SKIP LOCKED
                """, logger: logger)
            for try await row in rows.decode((Int64, String, String, String, Int32, Date).self) { due.append(row) }
            func reschedule(_ id: Int64, attempts: Int32, after: Duration?, reason: String) async throws {
                let delay = after.map { Double($0.components.seconds) } ?? Self.backoff(attempts: Int(attempts))
                let next = now.addingTimeInterval(delay)
                try await connection.query(
                    "UPDATE events SET attempts = attempts + 1, next_attempt_at = \(next), last_error = \(reason) WHERE id = \(id)",
                    logger: logger)
            }
            var pass = Pass()
            var disabled: Set<String> = []
            for (id, customer, name, text, attempts, createdAt) in due {
                var metadata: Logger.Metadata = ["event.id": "\(id)", "event.name": "\(name)"]
                if disabled.contains(customer) { continue }
                guard now.timeIntervalSince(createdAt) < Self.maximumAge else {
                    try await connection.query("DELETE FROM events WHERE id = \(id)", logger: logger)
                    logger.warning("event dropped: not sent within a day", metadata: metadata)
                    pass.dropped += 1
                    continue
                }
                guard let event = try? JSON.parse(text) else {
                    try await connection.query("DELETE FROM events WHERE id = \(id)", logger: logger)
                    pass.dropped += 1
                    continue
                }
                var outcome: GatewayOutcome
                switch try await token(customer: customer, now: now, force: false, connection: connection) {
                case .none:
                    outcome = .retry(after: .seconds(60), reason: "no grant from this customer yet")
                case .some(let token):
                    outcome = await gateway.send(AlexaMessage.withScope(event, token: token), token: token)
                    if outcome == .invalidToken,
                        let fresh = try await self.token(
                            customer: customer, now: now, force: true, connection: connection)
                    {
                        outcome = await gateway.send(AlexaMessage.withScope(event, token: fresh), token: fresh)
                    }
                }
                switch outcome {
                case .accepted:
                    try await connection.query("DELETE FROM events WHERE id = \(id)", logger: logger)
                    pass.sent += 1
                case .skillDisabled:
                    try await connection.query("DELETE FROM grants WHERE customer = \(customer)", logger: logger)
                    try await connection.query("DELETE FROM events WHERE customer = \(customer)", logger: logger)
                    disabled.insert(customer)
                    logger.notice(
                        "the customer disabled the skill: their tokens and events dropped", metadata: metadata)
                    pass.dropped += 1
                case .refused(let reason):
                    try await connection.query("DELETE FROM events WHERE id = \(id)", logger: logger)
                    metadata["gateway.code"] = "\(reason)"
                    logger.error("event refused by the gateway: dropped", metadata: metadata)
                    pass.dropped += 1
                case .invalidToken:
                    try await reschedule(
                        id, attempts: attempts, after: nil, reason: "INVALID_ACCESS_TOKEN_EXCEPTION after a refresh")
                    pass.retried += 1
                case .retry(let after, let reason):
                    try await reschedule(id, attempts: attempts, after: after, reason: reason)
                    pass.retried += 1
                }
            }
            return (pass, due.count)
        }
    }

    /// Seconds before the next attempt: 5 s doubling to 15 minutes.
    static func backoff(attempts: Int) -> TimeInterval { min(5 * pow(2, Double(min(attempts, 20))), 900) }

    /// The customer's access token, refreshed with LWA when it has under five minutes left or `force`; nil when
    /// the customer gave no grant, or LWA refused the refresh (the grant is dropped: the customer links again).
    func token(customer: String, now: Date, force: Bool, connection: PostgresConnection) async throws -> String? {
        var grant: (String, String, Date)?
        for try await row in try await connection.query(
            "SELECT access_token, refresh_token, expires_at FROM grants WHERE customer = \(customer) FOR UPDATE",
            logger: logger
        ).decode((String, String, Date).self) { grant = row }
        guard let (access, refresh, expiresAt) = grant else { return nil }
        if !force, expiresAt.timeIntervalSince(now) > 300 { return access }
        do {
            let tokens = try await lwa.refresh(refreshToken: refresh)
            let expires = now.addingTimeInterval(TimeInterval(tokens.expiresIn))
            try await connection.query(
                """
                UPDATE grants SET access_token = \(tokens.accessToken), refresh_token = \(tokens.refreshToken),
                  expires_at = \(expires), updated_at = \(now) WHERE customer = \(customer)
                """, logger: logger)
            return tokens.accessToken
        } catch LWAFailure.refused(let reason) {
            try await connection.query("DELETE FROM grants WHERE customer = \(customer)", logger: logger)
            logger.warning("LWA refused the grant's refresh: dropped", metadata: ["lwa.error": "\(reason)"])
            return nil
        } catch {
            logger.warning("the grant's refresh failed: sent again later", metadata: ["lwa.error": "\(error)"])
            return force ? nil : access
        }
    }
}
