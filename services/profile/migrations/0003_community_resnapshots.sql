-- Community changes re-announced to consumers: UpdateCommunity records a job in its own transaction; a
-- background task then re-snapshots the community's members in user-id order (ProfileUpdated with a new version
-- each, so consumers that keep the newest version apply it), resuming after `after_user_id`. A later update
-- of the same community starts its job again from the beginning.
CREATE TABLE community_resnapshots (
    community_id  text PRIMARY KEY REFERENCES communities (id) ON DELETE CASCADE,
    after_user_id text NOT NULL DEFAULT '',
    requested_at  timestamptz NOT NULL DEFAULT now()
);
