-- The durable queue of notifications: one row per member and event that should reach them (a new match, a message,
-- a likes digest, a report outcome). Rows hold ids only; texts are rendered when sent, in each device's locale, so
-- nothing a member wrote or showed is kept here. (user_id, kind, source_id) makes enqueueing idempotent: an event
-- delivered twice queues one notification, whose notification_id stays the same across every retry.
CREATE TABLE notifications (
    notification_id  uuid PRIMARY KEY,
    -- The recipient.
    user_id          uuid NOT NULL,
    kind             text NOT NULL CHECK (kind IN ('new_match', 'new_message', 'likes', 'report_outcome')),
    -- The other member it is about, if any (a block, an unmatch or a deletion cancels what is pending about them).
    subject_user_id  uuid,
    -- The match, thread or report it comes from.
    source_id        text NOT NULL,
    -- One notification per thread or digest replaces the previous one on the device.
    collapse_key     text,
    -- Mutual match or one-way connection (new_match only).
    connection       boolean NOT NULL DEFAULT false,
    state            text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'cancelled', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, kind, source_id)
);
CREATE INDEX notifications_due ON notifications (next_attempt_at) WHERE state = 'pending';
CREATE INDEX notifications_subject ON notifications (subject_user_id) WHERE subject_user_id IS NOT NULL;
