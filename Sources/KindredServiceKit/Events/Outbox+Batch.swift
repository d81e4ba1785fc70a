import Foundation
import KindredPostgres
import KindredProto

extension Outbox {
    /// The events of many state changes appended by ONE statement, for writers that commit many callers' changes
    /// in one transaction (match's group-committed swipes): the envelope is filled in as ``append(_:in:)`` does,
    /// each partition's counter row is bumped once by the number of its events (locked until the transaction
    /// ends, so sequences commit in order) and the cursors of the consumers that apply them are marked pending.
    /// After the commit, the writer wakes the relays with ``announce(through:)``.
    ///
    /// The statement can go into a pipeline with the other writes of the transaction (one round trip). Its rows
    /// lock partitions in ascending key order (each partition's cursors in consumer order, as ``append(_:in:)``
    /// and the relay take them), so two such batches, or a batch and a relay, cannot deadlock on them. Returns
    /// nil for no events. Throws ``OutboxError`` for an event without payload or partition (a programming error).
    public func appendQuery(_ events: [Kindred.Common.V1.Event]) throws -> PostgresQuery? {
        guard !events.isEmpty else { return nil }
        var ids: [String] = []
        var users: [String] = []
        var communities: [String] = []
        var partitions: [String] = []
        var types: [String] = []
        var payloads: [String] = []
        var occurred: [PostgresTimestamp] = []
        let now = PostgresTimestamp.now.millisecondsSinceEpoch
        // Sorted by partition (stable): partition rows are locked in that order; per partition, events keep
        // the order they were given in.
        let ordered = events.enumerated().sorted {
            let (a, b) = ($0.element.partitionKey, $1.element.partitionKey)
            return a == b ? $0.offset < $1.offset : a < b
        }.map(\.element)
        for original in ordered {
            guard let payload = original.payload else { throw OutboxError("an event needs a payload") }
            var event = original
            guard !event.partitionKey.isEmpty else { throw OutboxError("an event needs a user_id or a community_id") }
            event.producer = self.producer
            event.eventId = try UUIDv7.generate()
            if event.occurredUnixMs == 0 { event.occurredUnixMs = now }
            EventTracing.stamp(&event)
            ids.append(event.eventId)
            users.append(event.userId)
            communities.append(event.communityId)
            partitions.append(event.partitionKey)
            types.append(payload.typeName)
            occurred.append(PostgresTimestamp(millisecondsSinceEpoch: event.occurredUnixMs))
            // Stored without its sequence: the relay sets it from the column when it sends.
            payloads.append(Data(try event.serializedBytes()).base64EncodedString())
        }
        return """
            WITH input AS (
                SELECT * FROM unnest(\(ids)::uuid[], \(users)::text[], \(communities)::text[], \(partitions)::text[],
                                     \(types)::text[], \(payloads)::text[], \(occurred)::timestamptz[])
                    WITH ORDINALITY AS e(event_id, user_id, community_id, partition_key, event_type, payload, created_at, ord)
            ), counts AS (
                SELECT partition_key, count(*)::bigint AS n FROM input GROUP BY partition_key
            ), bumped AS (
                INSERT INTO events_partitions AS p (partition_key, last_sequence)
                SELECT partition_key, nextval(pg_get_serial_sequence('events_outbox', 'id')) + n - 1
                FROM counts ORDER BY partition_key
                ON CONFLICT (partition_key) DO UPDATE SET last_sequence = p.last_sequence
                    + (SELECT c.n FROM counts c WHERE c.partition_key = EXCLUDED.partition_key)
                RETURNING partition_key, last_sequence
            ), numbered AS (
                SELECT input.*, bumped.last_sequence - counts.n
                    + row_number() OVER (PARTITION BY input.partition_key ORDER BY input.ord) AS sequence
                FROM input JOIN bumped USING (partition_key) JOIN counts USING (partition_key)
            ), written AS (
                INSERT INTO events_outbox
                    (event_id, user_id, community_id, partition_key, sequence, event_type, payload, created_at)
                SELECT event_id, user_id, community_id, partition_key, sequence, event_type,
                       decode(payload, 'base64'), created_at
                FROM numbered ORDER BY ord
                RETURNING partition_key, sequence, event_type, created_at
            ), pending AS (
                -- Per partition, each consumer's last and first event of the types it applies.
                INSERT INTO events_cursors (consumer, partition_key, appended_sequence, pending_since)
                SELECT c.consumer, w.partition_key, max(w.sequence), min(w.created_at)
                FROM events_consumers c
                JOIN written w ON c.event_types IS NULL OR w.event_type = ANY(c.event_types)
                GROUP BY w.partition_key, c.consumer ORDER BY 2, 1
                ON CONFLICT (consumer, partition_key) DO UPDATE SET
                    appended_sequence = EXCLUDED.appended_sequence,
                    pending_since = COALESCE(events_cursors.pending_since, EXCLUDED.pending_since)
            )
            SELECT count(*) FROM written
            """
    }
}
