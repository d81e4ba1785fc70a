import Foundation
import KindredPostgres
import KindredProto

/// The producer side of events: writes a `kindred.common.v1.Event` into the service's `events_outbox` in the
/// caller's transaction, so the event exists exactly when the state change it reports is committed.
///
/// ```swift
/// try await database.withTransaction { transaction in
///     try await transaction.execute("UPDATE accounts SET status = 'deactivated' WHERE id = \(id)")
///     var event = Kindred.Common.V1.Event()
///     event.userId = id
///     event.communityId = community
///     event.payload = .accountDeactivated(.with { $0.sessionsRevoked = true })
///     try await outbox.append(event, in: transaction)
/// }
/// ```
///
/// `append` fills the envelope: `producer`, a UUIDv7 `event_id`, `occurred_unix_ms` (when unset) and the
/// partition's next `sequence`. The sequence comes from a per-partition counter row (`events_partitions`)
/// that the transaction keeps locked until it ends, so two transactions appending to the same partition
/// commit in sequence order: the relay can never see sequence n+1 without n. A partition's counter starts
/// at the outbox's global id counter (which every append advances by two or more), so when the relay
/// removes an idle partition's rows (``OutboxRelay``'s purge: no user id outlives its events by more than
/// the retention) and the partition comes back, its sequences still only grow. Every registered consumer that
/// applies the event's type (`events_consumers`, written by the relay from its configuration and
/// ``EventSubscriptions``) gets its cursor row marked pending, and a NOTIFY on ``channel`` after the commit wakes
/// the relays at once (queued with the transaction, ``PostgresTransaction/queueNotification(channel:payload:)``: a
/// NOTIFY inside it would make the commit wait for every other notifying commit of the server). A notification
/// lost with its process costs time, not events: the relays also look on a timer.
///
/// The cursor rows are locked partition by partition, each partition's in consumer order. A transaction that
/// appends to several partitions appends them in ascending partition key (as ``appendQuery(_:)`` does), the
/// order the relay's purge takes them in. When the relay records a batch (``OutboxRelayStore``), it skips the
/// cursors an append holds and then waits on each alone, so it never holds a cursor that an append waits for.
///
/// In a SERIALIZABLE transaction, two appends to the same partition at once conflict on the counter row;
/// `withTransaction` retries the loser (up to its `maxAttempts`), as for any other conflict.
///
/// The tables are in ``schemaSQL``; a producer copies it into a numbered migration of its own.
public struct Outbox: Sendable {
    /// The producing service: "auth", "profile", "match", "chat".
    public let producer: String

    public init(producer: String) {
        self.producer = producer
    }

    /// The LISTEN/NOTIFY channel of this producer's relays.
    public var channel: String { "kindred_events_" + self.producer }

    /// Appends `event` in `transaction` and returns it as written (envelope filled in). Throws
    /// ``OutboxError`` for an event without partition or payload (a programming error, not bad input).
    @discardableResult
    public func append(_ event: Kindred.Common.V1.Event, in transaction: PostgresTransaction) async throws
        -> Kindred.Common.V1.Event
    {
        var (event, query) = try self.appendQuery(event: event, in: transaction)
        event.sequence = try await transaction.query(query).scalar(Int64.self)
        return event
    }

    /// The statement of ``append(_:in:)``, for a transaction that sends it with others in one round trip (a
    /// pipeline, or ``PostgresTransaction/commit(after:)``), and the event with its envelope filled in but for the
    /// sequence (the first column of the statement's one row). The relays' wake-up is queued with `transaction`.
    public func appendQuery(event: Kindred.Common.V1.Event, in transaction: PostgresTransaction) throws
        -> (event: Kindred.Common.V1.Event, query: PostgresQuery)
    {
        let appended = try self.appendStatement(event: event)
        transaction.queueNotification(channel: self.channel)
        return appended
    }

    /// Wakes the relays after a commit that appended events by ``appendQuery(_:)`` (a writer committing on a
    /// connection of its own, without a ``PostgresTransaction``).
    public func announce(through database: PostgresClient) {
        database.queueNotification(channel: self.channel)
    }

    private func appendStatement(event: Kindred.Common.V1.Event) throws
        -> (event: Kindred.Common.V1.Event, query: PostgresQuery)
    {
        guard let payload = event.payload else { throw OutboxError("an event needs a payload") }
        var event = event
        let partition = event.userId.isEmpty ? event.communityId : event.userId
        guard !partition.isEmpty else { throw OutboxError("an event needs a user_id or a community_id") }
        event.producer = self.producer
        event.eventId = try UUIDv7.generate()
        if event.occurredUnixMs == 0 { event.occurredUnixMs = PostgresTimestamp.now.millisecondsSinceEpoch }
        EventTracing.stamp(&event)
        // One statement: the partition's counter row (locked until the transaction ends, see the type's
        // documentation), the event, and its consumers' cursors. The payload is stored without its sequence, as the
        // batch form ``appendQuery(_:)`` stores it: the relay sets it from the column when it sends.
        let occurred = PostgresTimestamp(millisecondsSinceEpoch: event.occurredUnixMs)
        let query: PostgresQuery = """
            WITH bumped AS (
                INSERT INTO events_partitions (partition_key, last_sequence)
                VALUES (\(partition), nextval(pg_get_serial_sequence('events_outbox', 'id')))
                ON CONFLICT (partition_key) DO UPDATE SET last_sequence = events_partitions.last_sequence + 1
                RETURNING last_sequence
            ), written AS (
                INSERT INTO events_outbox
                    (event_id, user_id, community_id, partition_key, sequence, event_type, payload, created_at)
                SELECT \(event.eventId)::uuid, \(event.userId), \(event.communityId), \(partition), last_sequence,
                       \(payload.typeName), \(try event.serializedBytes()), \(occurred)
                FROM bumped
                RETURNING sequence, created_at
            ), pending AS (
                INSERT INTO events_cursors (consumer, partition_key, appended_sequence, pending_since)
                SELECT consumer, \(partition), written.sequence, written.created_at FROM events_consumers, written
                WHERE event_types IS NULL OR \(payload.typeName) = ANY(event_types)
                ORDER BY consumer
                ON CONFLICT (consumer, partition_key) DO UPDATE SET
                    appended_sequence = EXCLUDED.appended_sequence,
                    pending_since = COALESCE(events_cursors.pending_since, EXCLUDED.pending_since)
            )
            SELECT sequence FROM written
            """
        return (event, query)
    }

    /// The producer's tables, to copy into a numbered migration (in the service's schema).
    ///
    /// - `events_outbox`: the events, kept after delivery for `OutboxRelay.purgeDelivered` to remove.
    /// - `events_partitions`: the last sequence per partition (the lock that orders appends).
    /// - `events_consumers`: the consumers the relays deliver to (registered from configuration), each with the
    ///   event types it applies (`event_types`, NULL for all: ``EventSubscriptions``). On the JetStream
    ///   bus, the publisher's row (`jetstream`) also records the stream its cursors refer to (`stream_created`,
    ///   `stream_sequence`: ``StreamMark``); NULL and 0 in every other row.
    /// - `events_cursors`: per consumer and partition, how far delivery got, and the lease and backoff of the
    ///   relay working on it. Pending = `acknowledged_sequence < appended_sequence`.
    public static let schemaSQL = """
        CREATE TABLE events_outbox (
            id            bigserial PRIMARY KEY,
            event_id      uuid NOT NULL UNIQUE,
            user_id       text NOT NULL,
            community_id  text NOT NULL,
            partition_key text NOT NULL,
            sequence      bigint NOT NULL,
            event_type    text NOT NULL,
            payload       bytea NOT NULL,
            created_at    timestamptz NOT NULL DEFAULT now(),
            UNIQUE (partition_key, sequence)
        );
        CREATE INDEX events_outbox_created ON events_outbox (created_at);
        CREATE TABLE events_partitions (
            partition_key text PRIMARY KEY,
            last_sequence bigint NOT NULL
        );
        CREATE TABLE events_consumers (
            consumer        text PRIMARY KEY,
            registered_at   timestamptz NOT NULL DEFAULT now(),
            stream_created  text,
            stream_sequence bigint NOT NULL DEFAULT 0,
            event_types     text[]
        );
        CREATE TABLE events_cursors (
            consumer              text NOT NULL REFERENCES events_consumers (consumer) ON DELETE CASCADE,
            partition_key         text NOT NULL,
            appended_sequence     bigint NOT NULL,
            acknowledged_sequence bigint NOT NULL DEFAULT 0,
            pending_since         timestamptz,
            attempts              integer NOT NULL DEFAULT 0,
            next_attempt_at       timestamptz NOT NULL DEFAULT now(),
            leased_by             text,
            leased_until          timestamptz,
            last_error            text,
            PRIMARY KEY (consumer, partition_key)
        );
        CREATE INDEX events_cursors_due ON events_cursors (consumer, pending_since NULLS FIRST)
            WHERE acknowledged_sequence < appended_sequence;
        """
}

/// A misuse of ``Outbox`` (an event without partition or payload).
public struct OutboxError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
