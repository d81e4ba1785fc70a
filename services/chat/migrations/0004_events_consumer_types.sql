-- The service kit's events tables (Outbox.schemaSQL): each consumer's row names the event types it applies
-- (EventSubscriptions; NULL for all), written by the relay when it registers its consumers. An append marks pending
-- only the cursors of consumers that apply its type, and the relay reads only those types.
ALTER TABLE events_consumers ADD COLUMN event_types text[];
