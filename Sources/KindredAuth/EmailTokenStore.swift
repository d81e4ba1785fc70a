import KindredPostgres

/// What a one-time email token proves (`email_tokens.purpose`).
enum EmailTokenPurpose: String, Sendable {
    case verifyEmail = "verify_email"
    case resetPassword = "reset_password"
    case changeEmail = "change_email"
}

/// A verification link's token with its account, locked (VerifyEmail by token).
struct VerificationTokenState: Sendable {
    var accountID: String
    var live: Bool
    var used: Bool
    var emailVerified: Bool
    var email: String
}

/// The newest live verification code of an address, locked (VerifyEmail by code).
struct VerificationCodeState: Sendable {
    var tokenHash: [UInt8]
    var accountID: String
    var codeHash: [UInt8]
    var attempts: Int32
}

/// The SQL of one-time email tokens (table `email_tokens`): verification, password reset and email change.
/// Only hashes are stored; one live token per account and purpose.
struct EmailTokenStore: Sendable {
    /// Ends the account's live tokens of `purpose` (a new one replaces them, or the secret they protect changed).
    func invalidate(accountID: String, purpose: EmailTokenPurpose, in transaction: PostgresTransaction)
        async throws
    {
        try await transaction.execute(
            """
            UPDATE email_tokens SET used_at = now()
            WHERE account_id = \(accountID) AND purpose = \(purpose.rawValue) AND used_at IS NULL
            """
        )
    }

    func create(
        hash: [UInt8],
        accountID: String,
        purpose: EmailTokenPurpose,
        codeHash: [UInt8]? = nil,
        newEmail: String? = nil,
        expiresAt: PostgresTimestamp,
        in transaction: PostgresTransaction
    ) async throws {
        try await transaction.execute(
            """
            INSERT INTO email_tokens (token_hash, account_id, purpose, code_hash, new_email, expires_at)
            VALUES (\(hash), \(accountID), \(purpose.rawValue), \(codeHash), \(newEmail), \(expiresAt))
            """
        )
    }

    func markUsed(hash: [UInt8], in transaction: PostgresTransaction) async throws {
        try await transaction.execute("UPDATE email_tokens SET used_at = now() WHERE token_hash = \(hash)")
    }

    func lockVerification(hash: [UInt8], in transaction: PostgresTransaction) async throws
        -> VerificationTokenState?
    {
        let rows = try await transaction.query(
            """
            SELECT t.account_id, t.expires_at > now(), t.used_at IS NOT NULL, a.email_verified, a.email
            FROM email_tokens t JOIN accounts a ON a.id = t.account_id
            WHERE t.token_hash = \(hash) AND t.purpose = 'verify_email' FOR UPDATE
            """
        )
        guard let row = rows.first else { return nil }
        let (accountID, live, used, verified, email) = try row.decode((String, Bool, Bool, Bool, String).self)
        return VerificationTokenState(
            accountID: accountID,
            live: live,
            used: used,
            emailVerified: verified,
            email: email
        )
    }

    func lockLatestVerificationCode(community: String, email: String, in transaction: PostgresTransaction)
        async throws -> VerificationCodeState?
    {
        let rows = try await transaction.query(
            """
            SELECT t.token_hash, t.account_id, t.code_hash, t.code_attempts
            FROM email_tokens t JOIN accounts a ON a.id = t.account_id
            WHERE a.community_id = \(community) AND a.email = \(email) AND t.purpose = 'verify_email'
              AND t.used_at IS NULL AND t.expires_at > now()
            ORDER BY t.created_at DESC LIMIT 1 FOR UPDATE OF t
            """
        )
        guard let row = rows.first else { return nil }
        let (tokenHash, accountID, codeHash, attempts) = try row.decode(([UInt8], String, [UInt8], Int32).self)
        return VerificationCodeState(tokenHash: tokenHash, accountID: accountID, codeHash: codeHash, attempts: attempts)
    }

    func countWrongCode(tokenHash: [UInt8], in transaction: PostgresTransaction) async throws {
        try await transaction.execute(
            "UPDATE email_tokens SET code_attempts = code_attempts + 1 WHERE token_hash = \(tokenHash)"
        )
    }

    /// The account of an unused, unexpired password-reset token, locked.
    func lockPasswordReset(hash: [UInt8], in transaction: PostgresTransaction) async throws -> String? {
        let rows = try await transaction.query(
            """
            SELECT account_id FROM email_tokens
            WHERE token_hash = \(hash) AND purpose = 'reset_password' AND used_at IS NULL AND expires_at > now()
            FOR UPDATE
            """
        )
        return try rows.first?.decode(String.self, at: 0)
    }

    /// The account, new address and community of an unused, unexpired email-change token; token and account
    /// locked.
    func lockEmailChange(hash: [UInt8], in transaction: PostgresTransaction) async throws
        -> (accountID: String, newEmail: String, communityID: String)?
    {
        let rows = try await transaction.query(
            """
            SELECT t.account_id, t.new_email, a.community_id FROM email_tokens t JOIN accounts a ON a.id = t.account_id
            WHERE t.token_hash = \(hash) AND t.purpose = 'change_email' AND t.used_at IS NULL AND t.expires_at > now()
            FOR UPDATE OF t, a
            """
        )
        return try rows.first.map { try $0.decode((String, String, String).self) }
    }
}
