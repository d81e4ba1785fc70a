import KindredOpenSSL
import KindredPostgres

/// The SQL of provider identities (tables `identities`, linking a Google/Apple subject to an account, and
/// `used_nonces`, which makes each ID-token nonce usable once).
struct IdentityStore: Sendable {
    /// Records the nonce as used until `expiresAt` (and forgets expired ones); false when it was used before.
    func claimNonce(_ nonce: String, expiresAt: PostgresTimestamp, in transaction: PostgresTransaction) async throws
        -> Bool
    {
        try await transaction.execute("DELETE FROM used_nonces WHERE expires_at < now()")
        let inserted = try await transaction.execute(
            """
            INSERT INTO used_nonces (nonce_hash, expires_at) VALUES (\(SHA256.hash(Array(nonce.utf8))), \(expiresAt))
            ON CONFLICT DO NOTHING
            """
        )
        return inserted == 1
    }

    /// The account linked to the provider's subject in `community`.
    func linkedAccount(
        provider: SignInMethod,
        subject: String,
        community: String,
        in transaction: PostgresTransaction
    ) async throws -> String? {
        let rows = try await transaction.query(
            """
            SELECT a.id FROM identities i JOIN accounts a ON a.id = i.account_id
            WHERE i.provider = \(provider.rawValue) AND i.subject = \(subject) AND a.community_id = \(community)
            """
        )
        return try rows.first?.decode(String.self, at: 0)
    }

    func link(
        provider: SignInMethod,
        subject: String,
        accountID: String,
        providerEmail: String,
        in transaction: PostgresTransaction
    ) async throws {
        try await transaction.execute(
            """
            INSERT INTO identities (provider, subject, account_id, provider_email)
            VALUES (\(provider.rawValue), \(subject), \(accountID), \(providerEmail))
            """
        )
    }
}
