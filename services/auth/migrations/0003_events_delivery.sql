-- The events outbox takes the service kit's layout (KindredServiceKit, Outbox.schemaSQL): events are ordered
-- per partition (the user) by a sequence of their own, and OutboxRelay delivers them per consumer, keeping
-- a cursor per consumer and partition instead of one delivered_at per event.
ALTER TABLE events_outbox ALTER COLUMN user_id TYPE text USING user_id::text;
ALTER TABLE events_outbox ADD COLUMN partition_key text, ADD COLUMN sequence bigint;
-- Events written so far took the row id as their sequence.
UPDATE events_outbox SET partition_key = user_id, sequence = id;
ALTER TABLE events_outbox
    ALTER COLUMN partition_key SET NOT NULL,
    ALTER COLUMN sequence SET NOT NULL,
    ADD CONSTRAINT events_outbox_partition_key_sequence_key UNIQUE (partition_key, sequence);
DROP INDEX events_outbox_pending;
ALTER TABLE events_outbox DROP COLUMN delivered_at;
CREATE INDEX events_outbox_created ON events_outbox (created_at);

-- The last sequence per partition: appends lock its row, so a partition's events commit in sequence order.
CREATE TABLE events_partitions (
    partition_key text PRIMARY KEY,
    last_sequence bigint NOT NULL
);
INSERT INTO events_partitions (partition_key, last_sequence)
SELECT partition_key, max(sequence) FROM events_outbox GROUP BY partition_key;

-- The consumers events go to; the relay adds the ones it is configured with.
CREATE TABLE events_consumers (
    consumer      text PRIMARY KEY,
    registered_at timestamptz NOT NULL DEFAULT now()
);

-- Per consumer and partition: how far delivery got, and the lease and backoff of the relay working on it.
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
CREATE INDEX events_cursors_pending ON events_cursors (consumer, next_attempt_at)
    WHERE acknowledged_sequence < appended_sequence;

-- Auth's consumers per proto/kindred/common/v1/events.proto. Registered here so that the events written
-- before this migration, and those written before a consumer is deployed, wait for it.
INSERT INTO events_consumers (consumer) VALUES ('profile'), ('discovery'), ('match'), ('chat');
INSERT INTO events_cursors (consumer, partition_key, appended_sequence, pending_since)
SELECT c.consumer, p.partition_key, p.last_sequence,
       (SELECT min(o.created_at) FROM events_outbox o WHERE o.partition_key = p.partition_key)
FROM events_consumers c CROSS JOIN events_partitions p;
