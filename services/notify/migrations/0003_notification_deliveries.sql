-- What the sender did with a queued notification. 'skipped': no device of the member could be reached (none
-- registered, or only devices of a push service this deployment has no keys for).
ALTER TABLE notifications DROP CONSTRAINT notifications_state_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_state_check
    CHECK (state IN ('pending', 'sent', 'cancelled', 'failed', 'skipped'));

-- The devices a notification was delivered to (the push service accepted it): a retry of the notification, after
-- another device asked to be tried later or after a restart, skips these, so each device gets it once.
CREATE TABLE notification_deliveries (
    notification_id  uuid NOT NULL REFERENCES notifications ON DELETE CASCADE,
    device_id        uuid NOT NULL,
    delivered_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (notification_id, device_id)
);
