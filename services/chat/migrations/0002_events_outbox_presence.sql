-- Chat produces events (MessageSent, for notify) through the service kit's outbox (Outbox.schemaSQL), and records
-- which members have a live Subscribe stream on any replica (presence: notify sends no push for a message to a
-- member whose app is open).
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
    consumer      text PRIMARY KEY,
    registered_at timestamptz NOT NULL DEFAULT now()
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
CREATE INDEX events_cursors_pending ON events_cursors (consumer, next_attempt_at)
    WHERE acknowledged_sequence < appended_sequence;

-- The consumers of chat's events (services/cluster.env KINDRED_EVENT_CONSUMERS_OF_CHAT), registered now so
-- events written before the first relay runs wait for them.
INSERT INTO events_consumers (consumer) VALUES ('notify');

-- One row per open Subscribe stream, refreshed by its server every KINDRED_CHAT_HEARTBEAT_MS; a row not refreshed
-- for three intervals (its server died) no longer counts, and housekeeping deletes it.
CREATE TABLE live_streams (
    stream_id    uuid PRIMARY KEY,
    user_id      uuid NOT NULL,
    refreshed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX live_streams_user ON live_streams (user_id, refreshed_at);
