import KindredPostgres

/// How a session was started (`sessions.method`).
enum SignInMethod: String, Sendable {
    case password, google, apple
}

/// Why a session ended (`sessions.revoke_reason`; the revocation feed relays it).
enum SessionEndReason: String, Sendable {
    case signOut = "sign_out"
    case signOutEverywhere = "sign_out_everywhere"
    case revoked
    case refreshTokenReused = "refresh_token_reused"
    case passwordChanged = "password_changed"
    case passwordReset = "password_reset"
    case deactivated
}

/// One live session as ListSessions shows it.
struct SessionRecord: Sendable {
    var id: String
    var method: SignInMethod?
    var deviceName: String
    var userAgent: String
    var createdAt: PostgresTimestamp
    var lastUsedAt: PostgresTimestamp
    var expiresAt: PostgresTimestamp
}

/// A refresh token with its session, locked (Refresh).
struct RefreshTokenState: Sendable {
    var sessionID: String
    var accountID: String
    var spent: Bool
    /// The token is unexpired and its session neither revoked nor expired.
    var live: Bool
    var sessionStart: PostgresTimestamp
    var sessionEnd: PostgresTimestamp
}

/// The SQL of the session aggregate: tables `sessions` and `refresh_tokens` (one refresh-token family per
/// session; services/auth/migrations).
struct SessionStore: Sendable {
    // MARK: Reads

    /// Whether the session is live and belongs to an active account (every user call checks this).
    func isLive(sessionID: String, accountID: String, in database: PostgresClient) async throws -> Bool {
        let rows = try await database.query(
            """
            SELECT 1 FROM sessions s JOIN accounts a ON a.id = s.account_id
            WHERE s.id = \(sessionID) AND s.account_id = \(accountID) AND s.revoked_at IS NULL
              AND s.expires_at > now() AND a.status = 'active'
            """
        )
        return !rows.isEmpty
    }

    /// Whether the session was started with an identity provider less than `seconds` ago (reauthentication of
    /// accounts without a password).
    func isRecentProviderSession(
        sessionID: String?,
        accountID: String,
        within seconds: Int64,
        in database: PostgresClient
    ) async throws -> Bool {
        let rows = try await database.query(
            """
            SELECT 1 FROM sessions
            WHERE id = \(sessionID) AND account_id = \(accountID) AND method IN ('google', 'apple')
              AND created_at > now() - make_interval(secs => \(Double(seconds)))
            """
        )
        return !rows.isEmpty
    }

    /// Live sessions of the account, most recently used first.
    func listLive(accountID: String, limit: Int, offset: Int, in database: PostgresClient) async throws
        -> [SessionRecord]
    {
        let rows = try await database.query(
            """
            SELECT id, method, device_name, user_agent, created_at, last_used_at, expires_at FROM sessions
            WHERE account_id = \(accountID) AND revoked_at IS NULL AND expires_at > now()
            ORDER BY last_used_at DESC, id LIMIT \(Int64(limit)) OFFSET \(Int64(offset))
            """
        )
        return try rows.map { row in
            let (id, method, device, agent, created, used, expires) = try row.decode(
                (String, String, String, String, PostgresTimestamp, PostgresTimestamp, PostgresTimestamp).self
            )
            return SessionRecord(
                id: id,
                method: SignInMethod(rawValue: method),
                deviceName: device,
                userAgent: agent,
                createdAt: created,
                lastUsedAt: used,
                expiresAt: expires
            )
        }
    }

    /// Ended sessions whose access tokens may still be presented (`revoked_sessions`, filled by a trigger on
    /// `sessions`): session id → keep-until in UTC milliseconds. The revocation feed's snapshot.
    func revokedSessions(in database: PostgresClient) async throws -> [String: Int64] {
        let rows = try await database.query(
            """
            SELECT session_id::text, (floor(extract(epoch FROM keep_until) * 1000))::bigint FROM revoked_sessions
            WHERE keep_until > now()
            """
        )
        var entries: [String: Int64] = [:]
        for row in rows {
            let (id, keepUntil) = try row.decode((String, Int64).self)
            entries[id] = keepUntil
        }
        return entries
    }

    /// Forgets ended sessions past their keep-until (no access token of theirs can be accepted any more).
    @discardableResult
    func purgeRevokedSessions(in database: PostgresClient) async throws -> Int {
        try await database.execute("DELETE FROM revoked_sessions WHERE keep_until < now()")
    }

    // MARK: Writes

    func create(
        id: String,
        accountID: String,
        method: SignInMethod,
        deviceName: String,
        userAgent: String,
        at time: PostgresTimestamp,
        expiresAt: PostgresTimestamp,
        in transaction: PostgresTransaction
    ) async throws {
        try await transaction.execute(
            """
            INSERT INTO sessions (id, account_id, method, device_name, user_agent, created_at, last_used_at, expires_at)
            VALUES (\(id), \(accountID), \(method.rawValue), \(deviceName), \(userAgent), \(time), \(time), \(expiresAt))
            """
        )
    }

    func addRefreshToken(
        hash: [UInt8],
        sessionID: String,
        issuedAt: PostgresTimestamp,
        expiresAt: PostgresTimestamp,
        in transaction: PostgresTransaction
    ) async throws {
        try await transaction.execute(
            """
            INSERT INTO refresh_tokens (token_hash, session_id, issued_at, expires_at)
            VALUES (\(hash), \(sessionID), \(issuedAt), \(expiresAt))
            """
        )
    }

    /// The refresh token and its session, both locked: this serialises concurrent refreshes of one family.
    func lockRefreshToken(hash: [UInt8], in transaction: PostgresTransaction) async throws -> RefreshTokenState? {
        let rows = try await transaction.query(
            """
            SELECT r.session_id, r.spent_at IS NOT NULL, r.expires_at > now(), s.revoked_at IS NULL,
                   s.expires_at > now(), s.created_at, s.expires_at, s.account_id
            FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id
            WHERE r.token_hash = \(hash) FOR UPDATE OF r, s
            """
        )
        guard let row = rows.first else { return nil }
        let (sessionID, spent, tokenLive, notRevoked, notExpired, start, end, accountID) = try row.decode(
            (String, Bool, Bool, Bool, Bool, PostgresTimestamp, PostgresTimestamp, String).self
        )
        return RefreshTokenState(
            sessionID: sessionID,
            accountID: accountID,
            spent: spent,
            live: tokenLive && notRevoked && notExpired,
            sessionStart: start,
            sessionEnd: end
        )
    }

    /// Spends the refresh token and records the session's use.
    func spendRefreshToken(hash: [UInt8], sessionID: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute("UPDATE refresh_tokens SET spent_at = now() WHERE token_hash = \(hash)")
        try await transaction.execute("UPDATE sessions SET last_used_at = now() WHERE id = \(sessionID)")
    }

    /// Ends the session if it is still live.
    func end(sessionID: String, reason: SessionEndReason, in transaction: PostgresTransaction) async throws {
        try await transaction.execute(
            """
            UPDATE sessions SET revoked_at = now(), revoke_reason = \(reason.rawValue)
            WHERE id = \(sessionID) AND revoked_at IS NULL
            """
        )
    }

    /// Ends the account's session `sessionID` if it is still live (SignOut with an access token).
    func end(sessionID: String, accountID: String, reason: SessionEndReason, in database: PostgresClient)
        async throws
    {
        try await database.execute(
            """
            UPDATE sessions SET revoked_at = now(), revoke_reason = \(reason.rawValue)
            WHERE id = \(sessionID) AND account_id = \(accountID) AND revoked_at IS NULL
            """
        )
    }

    /// Ends the account's session `sessionID` (already ended ones keep their first end); whether it exists.
    func endIfOwned(sessionID: String, accountID: String, reason: SessionEndReason, in database: PostgresClient)
        async throws -> Bool
    {
        let rows = try await database.query(
            """
            UPDATE sessions SET revoked_at = COALESCE(revoked_at, now()),
                revoke_reason = COALESCE(revoke_reason, \(reason.rawValue))
            WHERE id = \(sessionID) AND account_id = \(accountID) RETURNING id
            """
        )
        return !rows.isEmpty
    }

    /// Ends the session of a refresh token (already ended ones keep their first end); whether it exists.
    func end(refreshTokenHash hash: [UInt8], reason: SessionEndReason, in database: PostgresClient) async throws
        -> Bool
    {
        let rows = try await database.query(
            """
            UPDATE sessions SET revoked_at = COALESCE(revoked_at, now()),
                revoke_reason = COALESCE(revoke_reason, \(reason.rawValue))
            WHERE id = (SELECT session_id FROM refresh_tokens WHERE token_hash = \(hash))
            RETURNING id
            """
        )
        return !rows.isEmpty
    }

    /// Ends every live session of an account (optionally keeping one); returns how many ended.
    func endAll(
        accountID: String,
        except keep: String? = nil,
        reason: SessionEndReason,
        in transaction: PostgresTransaction
    ) async throws -> Int {
        try await transaction.execute(
            """
            UPDATE sessions SET revoked_at = now(), revoke_reason = \(reason.rawValue)
            WHERE account_id = \(accountID) AND revoked_at IS NULL AND (\(keep)::text IS NULL OR id <> \(keep))
            """
        )
    }
}
