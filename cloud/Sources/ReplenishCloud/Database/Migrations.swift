import Logging
import PostgresNIO

/// The database's schema, as numbered steps. `schema_version` holds the number of the last step applied; each
/// copy of the service applies the missing steps at its start, one copy at a time (a transaction-scoped advisory
/// lock), so copies started together do not race. A step is never edited once released: a change is a new step.
public enum Migrations {
    /// The schema version this build reads and writes.
    public static var current: Int { steps.count }

    static let lockKey: Int64 = 0x7265_706c_656e  // "replen"

    static let steps: [[String]] = [
        [
            """
            CREATE TABLE units (
              unit text PRIMARY KEY,
              setup_key text NOT NULL CHECK (setup_key ~ '^[0-9a-f]{32}$'),
              model text NOT NULL,
              revoked boolean NOT NULL DEFAULT false,
              registered_at timestamptz NOT NULL DEFAULT now())
            """,
            // Who a unit belongs to: one customer (Alexa's user, the account linking's LWA user id).
            """
            CREATE TABLE bindings (
              unit text PRIMARY KEY REFERENCES units ON DELETE CASCADE,
              customer text NOT NULL,
              bound_at timestamptz NOT NULL DEFAULT now())
            """,
            "CREATE INDEX bindings_customer ON bindings (customer)",
            """
            CREATE TABLE claim_nonces (
              unit text NOT NULL REFERENCES units ON DELETE CASCADE,
              nonce text NOT NULL,
              PRIMARY KEY (unit, nonce))
            """,
            // The last report applied, per unit and stream: a report at or below it is a duplicate.
            """
            CREATE TABLE streams (
              unit text NOT NULL REFERENCES units ON DELETE CASCADE,
              stream text NOT NULL,
              last_sequence bigint NOT NULL,
              PRIMARY KEY (unit, stream))
            """,
            """
            CREATE TABLE reports (
              unit text NOT NULL REFERENCES units ON DELETE CASCADE,
              stream text NOT NULL,
              sequence bigint NOT NULL,
              body jsonb NOT NULL,
              received_at timestamptz NOT NULL DEFAULT now(),
              PRIMARY KEY (unit, stream, sequence))
            """,
            // Each slot's latest level, for ReportState and the daily update.
            """
            CREATE TABLE levels (
              unit text NOT NULL REFERENCES units ON DELETE CASCADE,
              slot text NOT NULL,
              level jsonb NOT NULL,
              sampled_at timestamptz NOT NULL,
              PRIMARY KEY (unit, slot))
            """,
            // The customer's event-gateway tokens from AcceptGrant (Alexa.Authorization).
            """
            CREATE TABLE grants (
              customer text PRIMARY KEY,
              access_token text NOT NULL,
              refresh_token text NOT NULL,
              expires_at timestamptz NOT NULL,
              updated_at timestamptz NOT NULL DEFAULT now())
            """,
            // The events to send to the gateway: written in the transaction that applies their report, sent
            // (and deleted) by whichever copy leases them first, in order per endpoint. The message id is the
            // event's for good.
            """
            CREATE TABLE events (
              id bigserial PRIMARY KEY,
              customer text NOT NULL,
              endpoint text NOT NULL,
              message_id text NOT NULL UNIQUE,
              name text NOT NULL,
              event jsonb NOT NULL,
              created_at timestamptz NOT NULL DEFAULT now(),
              next_attempt_at timestamptz NOT NULL DEFAULT now(),
              attempts integer NOT NULL DEFAULT 0,
              last_error text)
            """,
            "CREATE INDEX events_due ON events (next_attempt_at)",
            "CREATE INDEX events_endpoint ON events (endpoint, id)",
            // The days whose daily update was queued: one copy queues it, however many run the schedule.
            "CREATE TABLE daily_updates (day date PRIMARY KEY, queued_at timestamptz NOT NULL DEFAULT now())",
            "CREATE TABLE schema_version (version integer NOT NULL)",
            "INSERT INTO schema_version VALUES (0)",
        ]
    ]

    /// Applies the steps the database lacks; refuses a database newer than this build.
    @discardableResult
    public static func apply(client: PostgresClient, logger: Logger) async throws -> Int {
        try await CloudStore.transaction(client: client, logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(lockKey))", logger: logger)
            let hasTable = try await connection.query(
                "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'", logger: logger
            ).decode(Int.self).reduce(0, +)
            var version = 0
            if hasTable > 0 {
                for try await value in try await connection.query("SELECT version FROM schema_version", logger: logger)
                    .decode(Int.self)
                { version = value }
            }
            guard version <= current else {
                throw CloudError(
                    .databaseTooNew, "the database is at schema version \(version), this build knows \(current)")
            }
            for index in version..<current {
                for statement in steps[index] {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query("UPDATE schema_version SET version = \(index + 1)", logger: logger)
                logger.info("schema step applied", metadata: ["schema.version": "\(index + 1)"])
            }
            return current
        }
    }
}
