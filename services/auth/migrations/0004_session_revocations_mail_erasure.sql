-- Session ends published at once, and mail bodies erased after delivery.

-- Ended sessions whose access tokens could still be unexpired (15 min lifetime + 30 s verifier leeway,
-- rounded up to 16 min). Filled by triggers on `sessions`, so every way a session ends (revoked_at set, or
-- the row deleted with its account) is covered in the transaction that ends it; purged after keep_until.
CREATE TABLE revoked_sessions (
    session_id uuid PRIMARY KEY,
    revoked_at timestamptz NOT NULL DEFAULT now(),
    keep_until timestamptz NOT NULL
);
CREATE INDEX revoked_sessions_keep_until ON revoked_sessions (keep_until);

-- Records the session end and notifies every auth replica (LISTEN auth_session_revoked) at commit.
-- Payload: "<session id> <keep_until in UTC ms>".
CREATE FUNCTION publish_session_end() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    keep timestamptz := now() + interval '16 minutes';
BEGIN
    INSERT INTO revoked_sessions (session_id, keep_until) VALUES (OLD.id, keep)
    ON CONFLICT (session_id) DO UPDATE SET keep_until = GREATEST(revoked_sessions.keep_until, EXCLUDED.keep_until);
    PERFORM pg_notify('auth_session_revoked', OLD.id::text || ' ' || floor(extract(epoch FROM keep) * 1000)::bigint::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER sessions_revoked AFTER UPDATE OF revoked_at ON sessions
    FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
    EXECUTE FUNCTION publish_session_end();

CREATE TRIGGER sessions_deleted AFTER DELETE ON sessions
    FOR EACH ROW WHEN (OLD.revoked_at IS NULL)
    EXECUTE FUNCTION publish_session_end();

-- Mail: once the relay has a final outcome (accepted or failed for good), the body (with its link or code)
-- and the address are erased; what operations need stays: a SHA-256 of the address, the template, the
-- timestamps and the outcome. Rows themselves are purged after KINDRED_AUTH_MAIL_RETENTION_SECONDS.
ALTER TABLE mail_outbox ADD COLUMN template text NOT NULL DEFAULT 'unknown';
ALTER TABLE mail_outbox ADD COLUMN recipient_hash bytea;
ALTER TABLE mail_outbox ALTER COLUMN recipient DROP NOT NULL;
ALTER TABLE mail_outbox ALTER COLUMN subject DROP NOT NULL;
ALTER TABLE mail_outbox ALTER COLUMN text_body DROP NOT NULL;

UPDATE mail_outbox SET recipient_hash = sha256(convert_to(recipient, 'UTF8')),
    template = CASE subject
        WHEN 'Confirm your email address' THEN 'verify_email'
        WHEN 'You already have a Kindred account' THEN 'already_registered'
        WHEN 'Reset your password' THEN 'password_reset'
        WHEN 'Confirm your new email address' THEN 'email_change_confirmation'
        WHEN 'Your email address is being changed' THEN 'email_change_notice'
        WHEN 'Email change request' THEN 'address_in_use'
        ELSE 'unknown' END;
UPDATE mail_outbox SET recipient = NULL, subject = NULL, text_body = NULL
WHERE sent_at IS NOT NULL OR failed_at IS NOT NULL;
ALTER TABLE mail_outbox ALTER COLUMN recipient_hash SET NOT NULL;
ALTER TABLE mail_outbox ALTER COLUMN template DROP DEFAULT;
CREATE INDEX mail_outbox_finished ON mail_outbox (COALESCE(sent_at, failed_at))
    WHERE sent_at IS NOT NULL OR failed_at IS NOT NULL;
