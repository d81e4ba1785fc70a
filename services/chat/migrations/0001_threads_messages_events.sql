-- Chat service schema: threads (one per match; thread id = match id), their two participants with read and
-- delivery positions, messages, each user's event log (what Subscribe streams and resumes from), the users
-- chat knows (deactivation, settings, the log's counter), community limits, and the events inbox.
-- Applied into schema "chat".

-- One row per user who took part in a thread. `event_sequence` is the last position of the user's event log:
-- appends lock this row, so a user's log positions commit in order (a resumed stream never skips one).
CREATE TABLE users (
    user_id            uuid PRIMARY KEY,
    event_sequence     bigint NOT NULL DEFAULT 0,
    -- Positions <= this were purged (24 h retention): resuming before it means ResyncRequired.
    purged_through     bigint NOT NULL DEFAULT 0,
    deactivated        boolean NOT NULL DEFAULT false,
    hide_read_receipts boolean NOT NULL DEFAULT false
);

CREATE TABLE threads (
    thread_id        uuid PRIMARY KEY,
    -- The participants, user_a < user_b.
    user_a           uuid NOT NULL,
    user_b           uuid NOT NULL CHECK (user_a < user_b),
    community_id     text NOT NULL,
    initiator        uuid,
    mode             integer NOT NULL DEFAULT 0,
    state            text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed')),
    -- Internal: who ended it and why (never shown to the other side).
    closed_by        uuid,
    close_reason     integer,
    closed_at        timestamptz,
    -- Sequence of the newest message; the next one gets last_sequence + 1 (row lock: no gaps, no reuse).
    last_sequence    bigint NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    last_activity_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX threads_user_a ON threads (user_a, last_activity_at DESC);
CREATE INDEX threads_user_b ON threads (user_b, last_activity_at DESC);

-- A participant's positions in a thread: messages of the other side up to these sequences are read / delivered.
CREATE TABLE read_states (
    thread_id       uuid NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
    user_id         uuid NOT NULL,
    read_up_to      bigint NOT NULL DEFAULT 0,
    delivered_up_to bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (thread_id, user_id)
);
CREATE INDEX read_states_user ON read_states (user_id);

CREATE TABLE messages (
    message_id        uuid PRIMARY KEY,
    thread_id         uuid NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
    sequence          bigint NOT NULL,
    sender_id         uuid NOT NULL,
    -- The sender's idempotency key: remembered as long as the message is stored.
    client_message_id text NOT NULL,
    body              text NOT NULL,
    sent_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (thread_id, sequence),
    UNIQUE (sender_id, client_message_id)
);
-- The hourly limit counts a sender's recent messages.
CREATE INDEX messages_sender_time ON messages (sender_id, sent_at);

-- Each user's event log: encoded kindred.chat.v1.ChatEvent (without resume token), kept 24 hours.
CREATE TABLE stream_events (
    user_id     uuid NOT NULL,
    sequence    bigint NOT NULL,
    -- The thread the event is about (erased with it); NULL for none.
    thread_id   uuid,
    event       bytea NOT NULL,
    occurred_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, sequence)
);
CREATE INDEX stream_events_thread ON stream_events (thread_id);
CREATE INDEX stream_events_time ON stream_events (occurred_at);

-- Community limits from profile's CommunityUpdated events.
CREATE TABLE communities (
    community_id         text PRIMARY KEY,
    hourly_message_limit integer NOT NULL,
    version              bigint NOT NULL
);

CREATE TABLE events_inbox (
    event_id      uuid PRIMARY KEY,
    producer      text NOT NULL,
    partition_key text NOT NULL,
    sequence      bigint NOT NULL,
    processed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_inbox_processed ON events_inbox (processed_at);
