-- Discovery's projection of what decks need (DESIGN §4): PostgreSQL is the source of truth, the in-memory index
-- per community is rebuilt from these tables at start (and by RebuildIndex) and kept current by the same events.

-- Communities (profile's CommunityUpdated): the whole Community message, newer versions win.
CREATE TABLE communities (
    community_id text PRIMARY KEY,
    community    bytea NOT NULL,
    version      bigint NOT NULL
);

-- Candidates (profile's ProfileUpdated / LocationChanged snapshots and IndexCandidate), newer versions win;
-- deactivated follows auth's AccountDeactivated / AccountReactivated. The snapshot holds a precision-6 cell only.
CREATE TABLE candidates (
    user_id      uuid PRIMARY KEY,
    community_id text NOT NULL,
    snapshot     bytea NOT NULL,
    version      bigint NOT NULL,
    deactivated  boolean NOT NULL DEFAULT false,
    indexed_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX candidates_community ON candidates (community_id);

-- Swipes (match's SwipeRecorded; an undone pass is deleted), with the ranking features of the pair when the
-- swipe was learned from (NULL when either side was not indexed) and the target's interest bits, so that a
-- rebuild replays the models exactly, in `seq` order.
CREATE TABLE swipes (
    seq              bigserial UNIQUE,
    viewer_id        uuid NOT NULL,
    target_id        uuid NOT NULL,
    community_id     text NOT NULL,
    swipe_id         uuid NOT NULL,
    liked            boolean NOT NULL,
    features         float8[],
    target_interests bigint NOT NULL DEFAULT 0,
    swiped_at        timestamptz NOT NULL,
    PRIMARY KEY (viewer_id, target_id)
);
CREATE INDEX swipes_target ON swipes (target_id);

-- Pairs kept apart: a block (kind 1: user_id blocked other_id) or an ended match (kind 2: user_id < other_id).
CREATE TABLE exclusions (
    user_id    uuid NOT NULL,
    other_id   uuid NOT NULL,
    kind       smallint NOT NULL CHECK (kind IN (1, 2)),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, other_id, kind)
);
CREATE INDEX exclusions_other ON exclusions (other_id);

-- The service kit's inbox (EventInbox.schemaSQL): discovery consumes auth's, profile's and match's events.
CREATE TABLE events_inbox (
    event_id      uuid PRIMARY KEY,
    producer      text NOT NULL,
    partition_key text NOT NULL,
    sequence      bigint NOT NULL,
    processed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_inbox_processed ON events_inbox (processed_at);
