-- Whether a community takes new members, learnt from profile's CommunityUpdated events (profile owns
-- communities). A community auth has not heard of takes sign-ups: profile opens every community it creates.
CREATE TABLE communities (
    community_id text PRIMARY KEY,
    sign_up_open boolean NOT NULL,
    version      bigint NOT NULL
);

-- The events auth has applied (the service kit's EventInbox layout).
CREATE TABLE events_inbox (
    event_id      uuid PRIMARY KEY,
    producer      text NOT NULL,
    partition_key text NOT NULL,
    sequence      bigint NOT NULL,
    processed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_inbox_processed ON events_inbox (processed_at);
