-- The sender claims due notifications by walking this index in order, a page of rows at a time, and stops once it has
-- enough (NotificationStore.claimDue): what it costs follows the page, not the backlog. The notification id orders
-- rows due at the same moment (one event batch queues many), so each page starts right after the row the last one
-- ended on.
DROP INDEX notifications_due;
CREATE INDEX notifications_due ON notifications (next_attempt_at, notification_id) WHERE state = 'pending';
