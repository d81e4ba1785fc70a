-- The service kit's events tables (Outbox.schemaSQL): a relay claims a consumer's due partitions oldest pending
-- first, a few at a time. Indexed in that order, the claim stops at its limit instead of reading and sorting every
-- pending cursor of the consumer (or, planned on a small table, every cursor row).
DROP INDEX events_cursors_pending;
CREATE INDEX events_cursors_due ON events_cursors (consumer, pending_since NULLS FIRST)
    WHERE acknowledged_sequence < appended_sequence;
