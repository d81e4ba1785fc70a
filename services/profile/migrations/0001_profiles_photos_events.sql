-- The profile service's tables (schema `profile`). Photos' bytes live in the configured photo store
-- (table photo_blobs by default, or a content-addressed folder); these tables hold the metadata.

-- Communities: id, name and settings (kindred.common.v1.CommunitySettings, protobuf-encoded), versioned.
CREATE TABLE communities (
    id           text PRIMARY KEY,
    display_name text NOT NULL,
    settings     bytea NOT NULL,
    version      bigint NOT NULL DEFAULT 1,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- One profile per user. `fields` is kindred.profile.v1.ProfileFields (protobuf-encoded); attribute_values
-- repeats each attribute value as a row of its own.
CREATE TABLE profiles (
    user_id         text PRIMARY KEY,
    community_id    text NOT NULL REFERENCES communities (id),
    fields          bytea NOT NULL,
    version         bigint NOT NULL DEFAULT 1,
    idempotency_key text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX profiles_community ON profiles (community_id, user_id);

-- Community-defined attribute values (kindred.common.v1.AttributeValue, protobuf-encoded), one per key.
CREATE TABLE attribute_values (
    user_id text NOT NULL REFERENCES profiles (user_id) ON DELETE CASCADE,
    key     text NOT NULL,
    value   bytea NOT NULL,
    PRIMARY KEY (user_id, key)
);

-- The coarse location: only the precision-7 geohash cell and when it was accepted (DESIGN.md §5).
CREATE TABLE locations (
    user_id    text PRIMARY KEY REFERENCES profiles (user_id) ON DELETE CASCADE,
    cell       text NOT NULL CHECK (length(cell) = 7),
    updated_at timestamptz NOT NULL
);

-- Photos: position, version, the SHA-256 of the original upload (content hash) and the upload key that
-- makes a retried upload idempotent.
CREATE TABLE photos (
    id           uuid PRIMARY KEY,
    user_id      text NOT NULL REFERENCES profiles (user_id) ON DELETE CASCADE,
    position     integer NOT NULL,
    version      bigint NOT NULL DEFAULT 1,
    content_hash bytea NOT NULL,
    width        integer NOT NULL,
    height       integer NOT NULL,
    upload_key   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, upload_key)
);
CREATE INDEX photos_user ON photos (user_id, position);

-- One row per rendition (variant x format); `blob_key` names the bytes in the photo store (the SHA-256 of
-- the encoded rendition, hex: content-addressed).
CREATE TABLE photo_variants (
    photo_id     uuid NOT NULL REFERENCES photos (id) ON DELETE CASCADE,
    variant      integer NOT NULL,
    format       text NOT NULL,
    width        integer NOT NULL,
    height       integer NOT NULL,
    byte_size    integer NOT NULL,
    blob_key     text NOT NULL,
    PRIMARY KEY (photo_id, variant, format)
);
CREATE INDEX photo_variants_blob ON photo_variants (blob_key);

-- The PostgreSQL photo store (the default): bytes by content key.
CREATE TABLE photo_blobs (
    key  text PRIMARY KEY,
    data bytea NOT NULL
);

-- Accounts auth deactivated (AccountDeactivated until AccountReactivated): hidden, data kept.
CREATE TABLE deactivated_accounts (
    user_id text PRIMARY KEY,
    since   timestamptz NOT NULL DEFAULT now()
);

-- Blocks as the match service reports them (UserBlocked / UserUnblocked): a card is invisible either way.
CREATE TABLE blocks (
    blocker_id text NOT NULL,
    blocked_id text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (blocker_id, blocked_id)
);
CREATE INDEX blocks_blocked ON blocks (blocked_id);

-- Events produced (service kit outbox; consumers per services/cluster.env) and consumed (inbox).
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
CREATE TABLE events_inbox (
    event_id      uuid PRIMARY KEY,
    producer      text NOT NULL,
    partition_key text NOT NULL,
    sequence      bigint NOT NULL,
    processed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_inbox_processed ON events_inbox (processed_at);
INSERT INTO events_consumers (consumer) VALUES ('discovery'), ('match'), ('chat');
