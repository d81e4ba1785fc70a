-- Message notifications (chat's MessageSent): one per thread while it waits, updated by later messages rather than
-- a second one queued (MessageCollapse), and the states of what the sender learned from chat at the push.

-- The thread a new_message notification is about; its latest message (whose body is shown when the member allows
-- it, read from chat at the push, never stored here); how many messages it stands for.
ALTER TABLE notifications ADD COLUMN thread_id uuid;
ALTER TABLE notifications ADD COLUMN latest_message_id uuid;
ALTER TABLE notifications ADD COLUMN item_count integer NOT NULL DEFAULT 1 CHECK (item_count >= 1);
-- Set while a sender holds the row (claimDue), cleared when it is put back (retry): a message is merged only into a
-- notification no sender is pushing, so none is folded into a push already on its way.
ALTER TABLE notifications ADD COLUMN claimed_at timestamptz;

-- 'suppressed': the member had the app open (a live chat stream) when it was due, so no push was needed.
ALTER TABLE notifications DROP CONSTRAINT notifications_state_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_state_check
    CHECK (state IN ('pending', 'sent', 'cancelled', 'failed', 'skipped', 'suppressed'));

CREATE INDEX notifications_collapsible ON notifications (user_id, collapse_key, created_at DESC) WHERE state = 'pending';
