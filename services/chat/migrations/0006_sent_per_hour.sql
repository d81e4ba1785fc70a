-- Messages each user sent per clock hour, for the hourly limit: the hour they count in (`sent_hour`), its count and
-- the hour before's. A send reads them under the sender's row lock (an estimate of the last 60 minutes: this hour's
-- count plus the part of the previous hour's still within them) instead of counting the sender's messages of the last
-- hour, which read a row per message at every send. Filled from the messages already stored.
ALTER TABLE users
    ADD COLUMN sent_hour timestamptz NOT NULL DEFAULT '-infinity',
    ADD COLUMN sent_in_hour integer NOT NULL DEFAULT 0,
    ADD COLUMN sent_in_previous_hour integer NOT NULL DEFAULT 0;

UPDATE users u SET
    sent_hour = date_trunc('hour', now()),
    sent_in_hour = (SELECT count(*) FROM messages m
                    WHERE m.sender_id = u.user_id AND m.sent_at >= date_trunc('hour', now())),
    sent_in_previous_hour = (SELECT count(*) FROM messages m
                             WHERE m.sender_id = u.user_id AND m.sent_at >= date_trunc('hour', now()) - interval '1 hour'
                               AND m.sent_at < date_trunc('hour', now()))
WHERE EXISTS (SELECT 1 FROM messages m WHERE m.sender_id = u.user_id
              AND m.sent_at >= date_trunc('hour', now()) - interval '1 hour');

-- Only that count read messages by sender and time; the footprint and erasure read by sender alone, through
-- UNIQUE (sender_id, client_message_id).
DROP INDEX messages_sender_time;
