-- The match service's tables (schema `match`). User ids are auth's account ids (uuid); communities are the
-- profile service's slugs. Projections (communities, members) are fed by events; everything else is match's own.

-- Community settings match needs, from profile's CommunityUpdated (newer `version` wins).
CREATE TABLE communities (
    community_id        text PRIMARY KEY,
    mode                smallint NOT NULL,             -- 1 mutual, 2 one-way
    daily_like_limit    integer NOT NULL,
    undo_window_seconds integer NOT NULL,
    daily_undo_limit    integer NOT NULL,
    version             bigint NOT NULL
);

-- Who may swipe and be swiped on: profile's ProfileUpdated (community, eligible; newer `version` wins) and
-- auth's AccountDeactivated/Reactivated (deactivated hides the user without ending anything).
CREATE TABLE members (
    user_id         uuid PRIMARY KEY,
    community_id    text NOT NULL,
    eligible        boolean NOT NULL DEFAULT false,
    profile_version bigint NOT NULL DEFAULT 0,
    deactivated     boolean NOT NULL DEFAULT false
);

-- One live swipe per (swiper, target): the pair key that makes Swipe idempotent. An undone pass is deleted
-- (its id moves to `undos`), so the person is unseen again. `outcome` is what the swipe led to when it was
-- recorded, so a replay answers exactly as the first call did.
CREATE TABLE swipes (
    swiper       uuid NOT NULL,
    target       uuid NOT NULL,
    community_id text NOT NULL,
    swipe_id     uuid NOT NULL UNIQUE,
    action       smallint NOT NULL,                    -- 1 like, 2 pass
    surface      text NOT NULL DEFAULT '',
    swiped_at    timestamptz NOT NULL,
    outcome      smallint NOT NULL,                    -- SwipeOutcome
    match_id     uuid,
    PRIMARY KEY (swiper, target)
);
-- "Who liked me" and deletion of a user's received swipes.
CREATE INDEX swipes_target ON swipes (target, swiped_at DESC);
-- The last swipe (undo) and the likes of the rolling 24 hours (daily like limit).
CREATE INDEX swipes_swiper_time ON swipes (swiper, swiped_at DESC);

-- Undone passes: idempotent Undo (by swipe id) and the daily undo limit.
CREATE TABLE undos (
    swipe_id  uuid PRIMARY KEY,
    swiper    uuid NOT NULL,
    target    uuid NOT NULL,
    undone_at timestamptz NOT NULL
);
CREATE INDEX undos_swiper ON undos (swiper, undone_at DESC);

-- Matches (mutual mode) and connections (one-way mode), one row per unordered pair while active
-- (user_low < user_high). Ended rows stay (ended_at set) until either account is deleted.
CREATE TABLE matches (
    match_id        uuid PRIMARY KEY,
    user_low        uuid NOT NULL,
    user_high       uuid NOT NULL,
    community_id    text NOT NULL,
    mode            smallint NOT NULL,
    initiator       uuid NOT NULL,                     -- first liker / follower
    created_at      timestamptz NOT NULL,
    reciprocated_at timestamptz,                       -- one-way: followed back
    ended_at        timestamptz,
    ended_by        uuid,
    end_reason      smallint,                          -- MatchEndReason
    CHECK (user_low < user_high)
);
CREATE UNIQUE INDEX matches_active_pair ON matches (user_low, user_high) WHERE ended_at IS NULL;
CREATE INDEX matches_low ON matches (user_low, created_at DESC);
CREATE INDEX matches_high ON matches (user_high, created_at DESC);

-- Blocks: symmetric in effect, one row per direction made.
CREATE TABLE blocks (
    blocker    uuid NOT NULL,
    blocked    uuid NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (blocker, blocked)
);
CREATE INDEX blocks_blocked ON blocks (blocked);

-- Reports for the admins; never shown to the reported user.
CREATE TABLE reports (
    report_id       uuid PRIMARY KEY,
    reporter        uuid NOT NULL,
    reported        uuid NOT NULL,
    community_id    text NOT NULL,
    reason          smallint NOT NULL,
    details         text NOT NULL DEFAULT '',
    message_ids     text[] NOT NULL DEFAULT '{}',
    photo_ids       text[] NOT NULL DEFAULT '{}',
    status          smallint NOT NULL DEFAULT 1,       -- 1 open, 2 resolved
    resolution      smallint NOT NULL DEFAULT 0,
    resolution_note text NOT NULL DEFAULT '',
    resolved_by     uuid,
    created_at      timestamptz NOT NULL,
    resolved_at     timestamptz,
    idempotency_key text NOT NULL,
    UNIQUE (reporter, idempotency_key)
);
CREATE INDEX reports_open ON reports (status, created_at);
CREATE INDEX reports_reported ON reports (reported);
