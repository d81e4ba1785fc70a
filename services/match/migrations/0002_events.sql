-- The service kit's events tables (Outbox.schemaSQL, EventInbox.schemaSQL): match produces swipe, match and
-- block events and consumes auth's account events and profile's profile and community events.
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


-- The consumers of match's events (services/cluster.env KINDRED_EVENT_CONSUMERS_OF_MATCH), registered now so
-- events written before the first relay runs wait for them.
INSERT INTO events_consumers (consumer) VALUES ('discovery'), ('chat'), ('profile');

CREATE TABLE events_inbox (
    event_id      uuid PRIMARY KEY,
    producer      text NOT NULL,
    partition_key text NOT NULL,
    sequence      bigint NOT NULL,
    processed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_inbox_processed ON events_inbox (processed_at);

