-- Notify service schema: the devices members are reached on, their notification settings, and the events inbox.
-- Applied into schema "notify".

-- One row per push token (or Web Push endpoint): a token belongs to one account at a time, so registering it from
-- another account moves the row (with a new device id). `session_id` is the auth session the device was
-- registered under: the end of that session (sign-out, sign-out everywhere, deactivation) removes the row.
CREATE TABLE devices (
    device_id          uuid PRIMARY KEY,
    user_id            uuid NOT NULL,
    session_id         text,
    platform           text NOT NULL CHECK (platform IN ('apns', 'fcm', 'web_push')),
    -- APNs device token, FCM registration token, or the Web Push endpoint URL.
    token              text NOT NULL,
    -- Web Push only: the subscription's keys (base64url).
    p256dh             text,
    auth_secret        text,
    app_id             text NOT NULL,
    locale             text NOT NULL DEFAULT 'en',
    time_zone          text NOT NULL DEFAULT 'UTC',
    app_version        text NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL DEFAULT now(),
    registered_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (platform, token),
    CHECK ((platform = 'web_push') = (p256dh IS NOT NULL AND auth_secret IS NOT NULL))
);
CREATE INDEX devices_user ON devices (user_id, registered_at DESC);
CREATE INDEX devices_session ON devices (session_id) WHERE session_id IS NOT NULL;

-- One row per member who changed their settings; without one the defaults apply (NotificationPreferences).
CREATE TABLE settings (
    user_id            uuid PRIMARY KEY,
    new_match          boolean NOT NULL,
    new_message        boolean NOT NULL,
    likes_received     boolean NOT NULL,
    report_outcome     boolean NOT NULL,
    quiet_enabled      boolean NOT NULL,
    quiet_start_minute integer NOT NULL CHECK (quiet_start_minute BETWEEN 0 AND 1439),
    quiet_end_minute   integer NOT NULL CHECK (quiet_end_minute BETWEEN 0 AND 1439),
    quiet_allow_matches boolean NOT NULL,
    time_zone          text NOT NULL DEFAULT '',
    show_message_text  boolean NOT NULL,
    updated_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE events_inbox (
    event_id      uuid PRIMARY KEY,
    producer      text NOT NULL,
    partition_key text NOT NULL,
    sequence      bigint NOT NULL,
    processed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_inbox_processed ON events_inbox (processed_at);
