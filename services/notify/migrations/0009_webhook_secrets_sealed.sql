-- Webhook signing secrets sealed at rest: `secret` and `previous_secret` hold AES-256-GCM ciphertexts under the
-- key of KINDRED_NOTIFY_WEBHOOK_KEY (WebhookSecretKey) when `secrets_sealed` is true. Rows written before hold the
-- bytes in the clear (false); notify seals them when it starts, and every row it writes is sealed.
ALTER TABLE webhook_endpoints ADD COLUMN secrets_sealed boolean NOT NULL DEFAULT false;
