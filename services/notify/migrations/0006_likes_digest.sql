-- Likes received, told as a digest ("3 people liked you") at most every KINDRED_NOTIFY_LIKES_DIGEST_MS, never naming
-- who (LikesDigest), and report outcomes (match's ReportResolved: "We reviewed your report").

-- The likes a waiting digest stands for, until it is sent: a block, an unmatch, a match between the two or the
-- liker's deactivation takes a like out, so the count is what the member could see in their likes received.
CREATE TABLE digest_likes (
    user_id          uuid NOT NULL,
    liker_id         uuid NOT NULL,
    notification_id  uuid NOT NULL REFERENCES notifications ON DELETE CASCADE,
    liked_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, liker_id)
);
CREATE INDEX digest_likes_liker ON digest_likes (liker_id);
CREATE INDEX digest_likes_notification ON digest_likes (notification_id);

-- When the sender finished a notification (sent, failed, skipped, suppressed, cancelled): the last digest's time
-- decides when the next may go.
ALTER TABLE notifications ADD COLUMN finished_at timestamptz;
