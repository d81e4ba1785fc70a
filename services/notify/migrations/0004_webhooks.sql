-- Webhooks: endpoints of an app team's own backend that hear about events, and one delivery per event and
-- endpoint. Applied into schema "notify".

-- An endpoint an admin registered. `secret` is the HMAC-SHA256 key (the bytes behind `whsec_…`), stored as is:
-- the database is the service's own and nothing else reads it (services/notify/README.md says so). After a
-- rotation `previous_secret` keeps signing alongside until `previous_secret_expires_at`. `paused_until` is the
-- endpoint's own back-pressure (429 / Retry-After): its deliveries wait, other endpoints' do not.
CREATE TABLE webhook_endpoints (
    endpoint_id               uuid PRIMARY KEY,
    url                       text NOT NULL,
    event_types               text[] NOT NULL CHECK (cardinality(event_types) BETWEEN 1 AND 20),
    description               text NOT NULL DEFAULT '',
    enabled                   boolean NOT NULL DEFAULT true,
    -- 'GONE' when the endpoint answered 410 and notify disabled it; '' otherwise.
    disabled_reason           text NOT NULL DEFAULT '',
    secret                    bytea NOT NULL,
    previous_secret           bytea,
    previous_secret_expires_at timestamptz,
    paused_until              timestamptz NOT NULL DEFAULT '-infinity',
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now()
);

-- One event to one endpoint, queued in the transaction that records the event in events_inbox. `delivery_id` is
-- the `webhook-id` header, the same on every attempt and replay; `body` the exact JSON sent every time. The body
-- holds ids only; `user_ids` are the members it names, so an account deletion erases what names them.
-- `scheduled_at` is when it was queued or replayed: retries stop a day (a setting) after it.
CREATE TABLE webhook_deliveries (
    delivery_id      uuid PRIMARY KEY,
    endpoint_id      uuid NOT NULL REFERENCES webhook_endpoints ON DELETE CASCADE,
    event_id         uuid NOT NULL,
    event_type       text NOT NULL,
    body             text NOT NULL,
    user_ids         uuid[] NOT NULL DEFAULT '{}',
    state            text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    last_status      integer NOT NULL DEFAULT 0,
    last_error       text NOT NULL DEFAULT '',
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    scheduled_at     timestamptz NOT NULL DEFAULT now(),
    created_at       timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz,
    UNIQUE (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, created_at DESC, delivery_id DESC);
CREATE INDEX webhook_deliveries_users ON webhook_deliveries USING gin (user_ids);
CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at);
