import Foundation
import Logging
import PostgresNIO

/// Sends the queued events to the gateway and deletes each one the gateway accepted.
///
/// No transaction is open while anything is sent: a pass leases its events in one short transaction (their next
/// attempt moved a lease ahead, so no other copy takes them), sends them, then settles each one in a statement of
/// its own. A copy that dies mid-pass leaves its events to be sent again when the lease runs out, under the same
/// message id. Events of one endpoint go in the order they were made: an event waits while an older one of its
/// endpoint is queued (a ChangeReport never overtakes its unit's AddOrUpdateReport). A customer's token is
/// refreshed in a transaction of its own, the grant's row locked, when it has less than five minutes left or the
/// gateway refused exactly that token.
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
    /// How long a pass holds the events it took: longer than the sends of a batch can take (10 s each at most).
    static let lease: TimeInterval = 120

    public init(store: CloudStore, gateway: any EventGateway, lwa: any LoginWithAmazon, logger: Logger) {
        self.store = store
        self.gateway = gateway
        self.lwa = lwa
        self.logger = logger
    }

    /// Sends what is due, in batches of `batch` (each the oldest event of its endpoint), until nothing due is left
    /// or `batches` batches went: a request sends one batch beside its own work, the schedule the rest.
    public func sendDue(now: @Sendable () -> Date, batch: Int = 10, batches: Int = .max) async throws -> Pass {
        var total = Pass()
        for _ in 0..<batches {
            let (pass, taken) = try await sendBatch(now: now(), batch: batch)
            total.sent += pass.sent
            total.retried += pass.retried
            total.dropped += pass.dropped
            if taken == 0 { break }
        }
        return total
    }

    struct Leased {
        var id: Int64
        var customer: String
        var name: String
        var event: String
        var attempts: Int32
        var createdAt: Date
    }

    /// Takes up to `batch` due events, each the oldest queued for its endpoint, and moves them a lease ahead.
    func lease(now: Date, batch: Int) async throws -> [Leased] {
        let until = now.addingTimeInterval(Self.lease)
        var leased: [Leased] = []
        let rows = try await store.client.query(
            """
            UPDATE events SET next_attempt_at = \(until) WHERE id IN (
              SELECT e.id FROM events e WHERE e.next_attempt_at <= \(now)
                AND NOT EXISTS (SELECT 1 FROM events o WHERE o.endpoint = e.endpoint AND o.id < e.id)
              ORDER BY e.id LIMIT \(batch) FOR UPDATE SKIP LOCKED)
            RETURNING id, customer, name, event::text, attempts, created_at
            """, logger: logger)
        for try await (id, customer, name, event, attempts, createdAt) in rows.decode(
            (Int64, String, String, String, Int32, Date).self)
        {
            leased.append(
                Leased(id: id, customer: customer, name: name, event: event, attempts: attempts, createdAt: createdAt))
        }
        return leased.sorted { $0.id < $1.id }
    }

    func sendBatch(now: Date, batch: Int) async throws -> (Pass, Int) {
        let due = try await lease(now: now, batch: batch)
        var pass = Pass()
        var disabled: Set<String> = []
        for event in due {
            var metadata: Logger.Metadata = ["event.id": "\(event.id)", "event.name": "\(event.name)"]
            if disabled.contains(event.customer) { continue }
            guard now.timeIntervalSince(event.createdAt) < Self.maximumAge, let body = try? JSON.parse(event.event)
            else {
                try await store.client.query("DELETE FROM events WHERE id = \(event.id)", logger: logger)
                logger.warning("event dropped: not sent within a day", metadata: metadata)
                pass.dropped += 1
                continue
            }
            var outcome: GatewayOutcome
            if let token = try await token(customer: event.customer, now: now, refused: nil) {
                outcome = await gateway.send(AlexaMessage.withScope(body, token: token), token: token)
                if outcome == .invalidToken,
                    let fresh = try await self.token(customer: event.customer, now: now, refused: token)
                {
                    outcome = await gateway.send(AlexaMessage.withScope(body, token: fresh), token: fresh)
                }
            } else {
                outcome = .retry(after: .seconds(60), reason: "no grant from this customer yet")
            }
            switch outcome {
            case .accepted:
                try await store.client.query("DELETE FROM events WHERE id = \(event.id)", logger: logger)
                pass.sent += 1
            case .skillDisabled:
                try await store.dropGrant(customer: event.customer)
                disabled.insert(event.customer)
                logger.notice("the customer disabled the skill: their tokens and events dropped", metadata: metadata)
                pass.dropped += 1
            case .refused(let reason):
                try await store.client.query("DELETE FROM events WHERE id = \(event.id)", logger: logger)
                metadata["gateway.code"] = "\(reason)"
                logger.error("event refused by the gateway: dropped", metadata: metadata)
                pass.dropped += 1
            case .invalidToken:
                try await reschedule(
                    event, now: now, after: nil, reason: "INVALID_ACCESS_TOKEN_EXCEPTION after a refresh")
                pass.retried += 1
            case .retry(let after, let reason):
                try await reschedule(event, now: now, after: after, reason: reason)
                pass.retried += 1
            }
        }
        return (pass, due.count)
    }

    func reschedule(_ event: Leased, now: Date, after: Duration?, reason: String) async throws {
        let delay = after.map { Double($0.components.seconds) } ?? Self.backoff(attempts: Int(event.attempts))
        let next = now.addingTimeInterval(delay)
        try await store.client.query(
            "UPDATE events SET attempts = attempts + 1, next_attempt_at = \(next), last_error = \(reason) WHERE id = \(event.id)",
            logger: logger)
    }

    /// Seconds before the next attempt: 5 s doubling to 15 minutes.
    static func backoff(attempts: Int) -> TimeInterval { min(5 * pow(2, Double(min(attempts, 20))), 900) }

    /// The customer's access token: refreshed with LWA, in a transaction of its own with the grant's row locked,
    /// when it has under five minutes left or it is the token the gateway just `refused` (a copy that refreshed
    /// meanwhile has changed it, and its token is used). Nil when the customer gave no grant, or LWA refused the
    /// refresh (`invalid_grant`: the grant is dropped, the customer links again).
    func token(customer: String, now: Date, refused: String?) async throws -> String? {
        try await CloudStore.transaction(client: store.client, logger: logger) { connection in
            var grant: (String, String, Date)?
            for try await row in try await connection.query(
                "SELECT access_token, refresh_token, expires_at FROM grants WHERE customer = \(customer) FOR UPDATE",
                logger: logger
            ).decode((String, String, Date).self) { grant = row }
            guard let (access, refresh, expiresAt) = grant else { return nil }
            let stale = refused.map { $0 == access } ?? false
            if !stale, expiresAt.timeIntervalSince(now) > 300 { return access }
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
                return stale ? nil : access
            }
        }
    }
}
