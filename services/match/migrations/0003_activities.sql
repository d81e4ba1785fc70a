-- Activity broadcasts ("working out now") in follow communities.

-- The community's "activities" attribute values, from profile's CommunityUpdated: what StartActivity accepts.
ALTER TABLE communities ADD COLUMN activities text[] NOT NULL DEFAULT '{}';

-- One row per StartActivity. A broadcast shows to the member's followers while ended_at is null (StopActivity or a
-- newer start ends it) and expires_at is ahead. `notified`: its ActivityStarted events told the followers; the
-- newest notified start opens the member's notify interval. The (user_id, idempotency_key) key makes retries replay.
CREATE TABLE activity_broadcasts (
    broadcast_id    uuid PRIMARY KEY,
    user_id         uuid NOT NULL,
    community_id    text NOT NULL,
    activity        text NOT NULL DEFAULT '',
    started_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    ended_at        timestamptz,
    notified        boolean NOT NULL,
    idempotency_key text NOT NULL,
    UNIQUE (user_id, idempotency_key)
);
-- The member's last notified start and old rows (purged when the member starts again).
CREATE INDEX activity_broadcasts_user ON activity_broadcasts (user_id, started_at DESC);
-- Followers' Home: the active broadcast of each member they follow.
CREATE INDEX activity_broadcasts_active ON activity_broadcasts (user_id) WHERE ended_at IS NULL;
