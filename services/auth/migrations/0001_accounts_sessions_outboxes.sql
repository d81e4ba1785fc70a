-- Auth service schema: accounts, one-time email tokens, sessions with refresh-token families,
-- linked OpenID identities, the mail outbox and the events outbox. Applied into schema "auth".

CREATE TABLE accounts (
    id                  uuid PRIMARY KEY,
    community_id        text NOT NULL,
    -- Normalised: trimmed, lower-case (local part included).
    email               text NOT NULL,
    email_verified      boolean NOT NULL DEFAULT false,
    pending_email       text,
    -- Lower-case; uniqueness is therefore case-insensitive.
    username            text NOT NULL,
    -- Argon2id PHC string; NULL for accounts created from an ID token.
    password_hash       text,
    roles               text[] NOT NULL DEFAULT ARRAY['user'],
    status              text NOT NULL CHECK (status IN ('pending', 'active', 'deactivated')),
    locale              text NOT NULL DEFAULT 'en',
    created_at          timestamptz NOT NULL DEFAULT now(),
    last_sign_in_at     timestamptz,
    deactivated_at      timestamptz,
    deactivation_note   text,
    username_changed_at timestamptz,
    UNIQUE (community_id, email),
    UNIQUE (community_id, username)
);

-- Single-use tokens sent by email. Only the SHA-256 of the token is stored.
CREATE TABLE email_tokens (
    token_hash   bytea PRIMARY KEY,
    account_id   uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    purpose      text NOT NULL CHECK (purpose IN ('verify_email', 'reset_password', 'change_email')),
    -- For change_email: the address being confirmed.
    new_email    text,
    -- For verify_email: SHA-256 of account id || the 6-digit code, and wrong attempts so far.
    code_hash    bytea,
    code_attempts integer NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    used_at      timestamptz
);
CREATE INDEX email_tokens_account ON email_tokens (account_id, purpose);

-- One row per signed-in session (= one refresh-token family).
CREATE TABLE sessions (
    id            uuid PRIMARY KEY,
    account_id    uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    method        text NOT NULL CHECK (method IN ('password', 'google', 'apple')),
    device_name   text NOT NULL DEFAULT '',
    user_agent    text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz NOT NULL DEFAULT now(),
    -- Absolute end of the session: refreshes never extend past it.
    expires_at    timestamptz NOT NULL,
    revoked_at    timestamptz,
    revoke_reason text
);
CREATE INDEX sessions_account ON sessions (account_id, last_used_at DESC);

-- Refresh tokens: SHA-256 only; each is spent by one Refresh.
CREATE TABLE refresh_tokens (
    token_hash  bytea PRIMARY KEY,
    session_id  uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    issued_at   timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    spent_at    timestamptz
);
CREATE INDEX refresh_tokens_session ON refresh_tokens (session_id);

-- Google / Apple identities linked to accounts.
CREATE TABLE identities (
    provider       text NOT NULL,
    subject        text NOT NULL,
    account_id     uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    provider_email text NOT NULL DEFAULT '',
    linked_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, subject)
);
CREATE INDEX identities_account ON identities (account_id);

-- ID-token nonces already accepted (replay protection), kept until the token would have expired.
CREATE TABLE used_nonces (
    nonce_hash bytea PRIMARY KEY,
    expires_at timestamptz NOT NULL
);

-- Mail written in the same transaction as the change that causes it; the relay sends it.
CREATE TABLE mail_outbox (
    id              bigserial PRIMARY KEY,
    account_id      uuid REFERENCES accounts (id) ON DELETE CASCADE,
    recipient       text NOT NULL,
    subject         text NOT NULL,
    text_body       text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    attempts        integer NOT NULL DEFAULT 0,
    sent_at         timestamptz,
    failed_at       timestamptz,
    last_error      text
);
CREATE INDEX mail_outbox_pending ON mail_outbox (next_attempt_at) WHERE sent_at IS NULL AND failed_at IS NULL;

-- Domain events (kindred.common.v1.Event, serialized) for other services.
CREATE TABLE events_outbox (
    id           bigserial PRIMARY KEY,
    event_id     uuid NOT NULL UNIQUE,
    user_id      uuid NOT NULL,
    community_id text NOT NULL,
    event_type   text NOT NULL,
    payload      bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz
);
CREATE INDEX events_outbox_pending ON events_outbox (id) WHERE delivered_at IS NULL;
