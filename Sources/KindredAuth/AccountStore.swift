import KindredPostgres

/// The SQL of the `accounts` aggregate (table `accounts`, migrations 0001+ in services/auth/migrations). Reads
/// that need no lock take the client; everything that decides a write takes the caller's transaction and locks
/// the row. A unique violation on the username becomes `AuthError.usernameTaken` here; other unique violations
/// are left to the central mapping (ALREADY_EXISTS).
struct AccountStore: Sendable {
    /// What `create` writes.
    struct NewAccount: Sendable {
        var id: String
        var communityID: String
        var email: String?
        var emailVerified: Bool
        var username: String
        var passwordHash: String?
        var status: AccountStatus
        var locale: String
    }

    // MARK: Reads

    func find(id: String, in database: PostgresClient) async throws -> AccountRecord? {
        let rows = try await database.query("SELECT \(unescaped: AccountRecord.columns) FROM accounts WHERE id = \(id)")
        return try rows.first.map(AccountRecord.init)
    }

    /// The account whose email or username is `login` in `community`; an email match wins.
    func find(community: String, login: String, in database: PostgresClient) async throws -> AccountRecord? {
        let rows = try await database.query(
            """
            SELECT \(unescaped: AccountRecord.columns) FROM accounts
            WHERE community_id = \(community) AND (email = \(login) OR username = \(login))
            ORDER BY (email = \(login)) DESC LIMIT 1
            """
        )
        return try rows.first.map(AccountRecord.init)
    }

    /// The email and password hash of the holder of `username`, if any (SignUp's idempotent retry check).
    func usernameHolder(community: String, username: String, in database: PostgresClient) async throws
        -> (email: String?, passwordHash: String?)?
    {
        let rows = try await database.query(
            "SELECT email, password_hash FROM accounts WHERE community_id = \(community) AND username = \(username)"
        )
        return try rows.first.map { try $0.decode((String?, String?).self) }
    }

    func isUsernameTaken(community: String, username: String, in database: PostgresClient) async throws -> Bool {
        let rows = try await database.query(
            "SELECT 1 FROM accounts WHERE community_id = \(community) AND username = \(username)"
        )
        return !rows.isEmpty
    }

    /// Accounts matching an admin's filter, newest first; `prefix` matches the start of the email or username.
    func list(
        community: String?,
        status: AccountStatus?,
        prefix: String,
        limit: Int,
        offset: Int,
        in database: PostgresClient
    ) async throws -> [AccountRecord] {
        // Prefix match: escape LIKE's wildcards in the user's text.
        let pattern =
            prefix.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
            .replacingOccurrences(of: "_", with: "\\_") + "%"
        let status = status?.rawValue
        let rows = try await database.query(
            """
            SELECT \(unescaped: AccountRecord.columns) FROM accounts
            WHERE (\(community)::text IS NULL OR community_id = \(community))
              AND (\(status)::text IS NULL OR status = \(status))
              AND (email LIKE \(pattern) OR username LIKE \(pattern))
            ORDER BY created_at DESC, id DESC LIMIT \(Int64(limit)) OFFSET \(Int64(offset))
            """
        )
        return try rows.map(AccountRecord.init)
    }

    /// Rows auth holds about a user, per table (the events outbox is excluded: it carries the deletion itself).
    func footprint(of userID: String, in database: PostgresClient) async throws -> [(String, Int64)] {
        let row = try await database.query(
            """
            SELECT (SELECT count(*) FROM accounts WHERE id = \(userID)),
                   (SELECT count(*) FROM sessions WHERE account_id = \(userID)),
                   (SELECT count(*) FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id WHERE s.account_id = \(userID)),
                   (SELECT count(*) FROM email_tokens WHERE account_id = \(userID)),
                   (SELECT count(*) FROM identities WHERE account_id = \(userID)),
                   (SELECT count(*) FROM mail_outbox WHERE account_id = \(userID))
            """
        )[0]
        let values = try row.decode((Int64, Int64, Int64, Int64, Int64, Int64).self)
        return [
            ("accounts", values.0), ("sessions", values.1), ("refresh_tokens", values.2),
            ("email_tokens", values.3), ("identities", values.4), ("mails", values.5),
        ]
    }

    // MARK: Locks

    /// The account with `id`, locked for update.
    func lock(id: String, in transaction: PostgresTransaction) async throws -> AccountRecord? {
        let rows = try await transaction.query(
            "SELECT \(unescaped: AccountRecord.columns) FROM accounts WHERE id = \(id) FOR UPDATE"
        )
        return try rows.first.map(AccountRecord.init)
    }

    /// The id, status and locale of the account with `email` in `community`, locked for update.
    func lock(community: String, email: String, in transaction: PostgresTransaction) async throws
        -> (id: String, status: AccountStatus, locale: String)?
    {
        let rows = try await transaction.query(
            "SELECT id, status, locale FROM accounts WHERE community_id = \(community) AND email = \(email) FOR UPDATE"
        )
        guard let row = rows.first else { return nil }
        let (id, status, locale) = try row.decode((String, String, String).self)
        return (id, try AccountStatus(stored: status), locale)
    }

    /// The ids of the accounts with `email` (in `community` when given), locked for update.
    func lockIDs(email: String, community: String?, in transaction: PostgresTransaction) async throws -> [String] {
        let rows = try await transaction.query(
            """
            SELECT id FROM accounts WHERE email = \(email) AND (\(community)::text IS NULL OR community_id = \(community))
            FOR UPDATE
            """
        )
        return try rows.map { try $0.decode(String.self, at: 0) }
    }

    /// The id of the account whose email or username is `login` in `community`.
    func findID(community: String, login: String, in transaction: PostgresTransaction) async throws -> String? {
        let rows = try await transaction.query(
            "SELECT id FROM accounts WHERE community_id = \(community) AND (email = \(login) OR username = \(login)) LIMIT 1"
        )
        return try rows.first?.decode(String.self, at: 0)
    }

    /// The id and locale of the account holding `email` in `community`, if any.
    func emailHolder(community: String, email: String, in transaction: PostgresTransaction) async throws
        -> (id: String, locale: String)?
    {
        let rows = try await transaction.query(
            "SELECT id, locale FROM accounts WHERE community_id = \(community) AND email = \(email)"
        )
        return try rows.first.map { try $0.decode((String, String).self) }
    }

    /// Whether an admin other than `except` exists.
    func adminExists(except: String? = nil, in transaction: PostgresTransaction) async throws -> Bool {
        let rows = try await transaction.query(
            "SELECT 1 FROM accounts WHERE 'admin' = ANY(roles) AND (\(except)::text IS NULL OR id <> \(except)) LIMIT 1"
        )
        return !rows.isEmpty
    }

    /// When the username was last changed, if within the last 24 hours.
    func recentUsernameChange(id: String, in transaction: PostgresTransaction) async throws -> PostgresTimestamp? {
        let rows = try await transaction.query(
            "SELECT username_changed_at FROM accounts WHERE id = \(id) AND username_changed_at > now() - interval '24 hours'"
        )
        return try rows.first?.decode(PostgresTimestamp.self, at: 0)
    }

    // MARK: Writes

    func create(_ account: NewAccount, in transaction: PostgresTransaction) async throws {
        try await Self.claimingUsername {
            try await transaction.execute(
                """
                INSERT INTO accounts (id, community_id, email, email_verified, username, password_hash, status, locale)
                VALUES (\(account.id), \(account.communityID), \(account.email), \(account.emailVerified),
                        \(account.username), \(account.passwordHash), \(account.status.rawValue), \(account.locale))
                """
            )
        }
    }

    /// Marks the email verified; a pending account becomes active.
    func markEmailVerified(id: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute(
            """
            UPDATE accounts SET email_verified = true,
                status = CASE WHEN status = 'pending' THEN 'active' ELSE status END
            WHERE id = \(id)
            """
        )
    }

    func setPasswordHash(_ hash: String, id: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute("UPDATE accounts SET password_hash = \(hash) WHERE id = \(id)")
    }

    /// Replaces the hash only if it is still `old` (a rehash after sign-in must not undo a concurrent change).
    func rehashPassword(id: String, from old: String?, to new: String, in transaction: PostgresTransaction)
        async throws
    {
        try await transaction.execute(
            "UPDATE accounts SET password_hash = \(new) WHERE id = \(id) AND password_hash = \(old)"
        )
    }

    func recordSignIn(id: String, at time: PostgresTimestamp, in transaction: PostgresTransaction) async throws {
        try await transaction.execute("UPDATE accounts SET last_sign_in_at = \(time) WHERE id = \(id)")
    }

    func setPendingEmail(_ email: String, id: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute("UPDATE accounts SET pending_email = \(email) WHERE id = \(id)")
    }

    /// Makes the confirmed pending address the account's email (verified; a pending account becomes active).
    func confirmEmail(_ email: String, id: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute(
            """
            UPDATE accounts SET email = \(email), pending_email = NULL, email_verified = true,
                status = CASE WHEN status = 'pending' THEN 'active' ELSE status END
            WHERE id = \(id)
            """
        )
    }

    func setUsername(_ username: String, id: String, in transaction: PostgresTransaction) async throws {
        try await Self.claimingUsername {
            try await transaction.execute(
                "UPDATE accounts SET username = \(username), username_changed_at = now() WHERE id = \(id)"
            )
        }
    }

    func setRoles(_ roles: [String], id: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute("UPDATE accounts SET roles = \(roles) WHERE id = \(id)")
    }

    /// Adds `admin` (and `user`) to the account's roles.
    func grantAdmin(id: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute(
            """
            UPDATE accounts SET roles = ARRAY(SELECT DISTINCT unnest(roles || ARRAY['user', 'admin']) ORDER BY 1)
            WHERE id = \(id)
            """
        )
    }

    func deactivate(id: String, note: String, at time: PostgresTimestamp, in transaction: PostgresTransaction)
        async throws
    {
        try await transaction.execute(
            """
            UPDATE accounts SET status = \(AccountStatus.deactivated.rawValue), deactivated_at = \(time),
                deactivation_note = \(note)
            WHERE id = \(id)
            """
        )
    }

    func reactivate(id: String, as status: AccountStatus, in transaction: PostgresTransaction) async throws {
        try await transaction.execute(
            """
            UPDATE accounts SET status = \(status.rawValue), deactivated_at = NULL, deactivation_note = NULL
            WHERE id = \(id)
            """
        )
    }

    /// Deletes the account; sessions, refresh tokens, email tokens, identities and queued mail go with it
    /// (ON DELETE CASCADE).
    func delete(id: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute("DELETE FROM accounts WHERE id = \(id)")
    }

    /// Runs a write that may claim a username: the unique violation on (community_id, username) becomes
    /// USERNAME_TAKEN, the one ALREADY_EXISTS auth reports.
    private static func claimingUsername(_ write: () async throws -> Int) async throws {
        do {
            _ = try await write()
        } catch let error as PostgresError
            where error.code == .uniqueViolation && error.constraint?.contains("username") == true
        {
            throw AuthError(.usernameTaken, "The username is taken")
        }
    }
}
