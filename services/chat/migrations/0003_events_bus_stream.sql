-- The service kit's events tables (Outbox.schemaSQL): on the JetStream bus, the publisher's row in events_consumers
-- records the stream its cursors refer to (its creation time and the highest last sequence seen), so a relay that
-- finds another stream, or the same one gone back (a restore of the databases, NATS losing its store), publishes
-- its outbox again (OutboxRelay.checkStream). NULL and 0 in every other row.
ALTER TABLE events_consumers ADD COLUMN stream_created text, ADD COLUMN stream_sequence bigint NOT NULL DEFAULT 0;
