import KindredGRPCServices
import KindredPostgres
import Logging

/// Webhook signing secrets are kept sealed (``WebhookSecretKey``). When notify starts, this seals the rows an older
/// version wrote in the clear and checks that the configured key opens every sealed one, so a missing or wrong key
/// stops the start with a message naming the setting instead of failing every delivery later.
enum WebhookSecretsAtRest {
    static let setting = "KINDRED_NOTIFY_WEBHOOK_KEY"

    static func prepare(key: WebhookSecretKey?, database: PostgresClient, logger: Logger) async throws {
        let store = WebhookStore()
        let rows = try await store.storedSecrets(in: database)
        guard !rows.isEmpty else { return }
        guard let key else {
            throw ConfigurationError(
                key: Self.setting,
                problem: "(or \(Self.setting)_FILE) is required: \(rows.count) webhook endpoint(s) have signing "
                    + "secrets, which notify keeps sealed with it")
        }
        var sealedNow = 0
        for row in rows {
            if row.sealed {
                do {
                    _ = try Self.open(row.secret, row.previousSecret, sealed: true, endpoint: row.endpointID, key: key)
                } catch {
                    throw ConfigurationError(
                        key: Self.setting,
                        problem: "does not open the webhook secrets stored (endpoint \(row.endpointID)): it is not "
                            + "the key they were sealed with")
                }
            } else {
                try await store.seal(
                    row.endpointID, secret: try key.seal(WebhookSecret(key: row.secret), endpoint: row.endpointID),
                    previousSecret: try row.previousSecret.map {
                        try key.seal(WebhookSecret(key: $0), endpoint: row.endpointID)
                    },
                    in: database)
                sealedNow += 1
            }
        }
        if sealedNow > 0 {
            logger.notice("webhook secrets stored in the clear are sealed now", metadata: ["count": "\(sealedNow)"])
        }
    }

    /// The secrets of a row as stored: opened with `key` when sealed, else taken as they are (a row an older
    /// version wrote that the start has not sealed yet). Throws `WebhookSecretKey.WrongKey` when a sealed value
    /// does not open or there is no key.
    static func open(_ secret: [UInt8], _ previous: [UInt8]?, sealed: Bool, endpoint: String, key: WebhookSecretKey?)
        throws -> [WebhookSecret]
    {
        let stored = [secret] + (previous.map { [$0] } ?? [])
        guard sealed else { return stored.map { WebhookSecret(key: $0) } }
        guard let key else { throw WebhookSecretKey.WrongKey() }
        return try stored.map { try key.open($0, endpoint: endpoint) }
    }
}
