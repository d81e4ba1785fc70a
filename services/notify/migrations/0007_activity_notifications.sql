-- Activity broadcasts ("working out now") of members a member follows: match's ActivityStarted queues one
-- notification per follower (kind 'activity', source the broadcast id), shown until the broadcast expires.

-- The member's setting for them (default on).
ALTER TABLE settings ADD COLUMN activities boolean NOT NULL DEFAULT true;

ALTER TABLE notifications DROP CONSTRAINT notifications_kind_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_kind_check
    CHECK (kind IN ('new_match', 'new_message', 'likes', 'report_outcome', 'activity'));
-- activity: the community's activity key (not something a member wrote), and when the broadcast ends: a
-- notification still pending then (quiet hours, an outage) is cancelled rather than sent late.
ALTER TABLE notifications ADD COLUMN activity text;
ALTER TABLE notifications ADD COLUMN expires_at timestamptz;
