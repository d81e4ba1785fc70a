import KindredPostgres
import KindredProto

/// One `accounts` row as the handlers need it. `passwordHash` never leaves the service.
struct AccountRecord: Sendable {
    static let columns = """
        id, community_id, email, email_verified, pending_email, username, password_hash, roles, status, \
        created_at, last_sign_in_at, deactivated_at, deactivation_note
        """

    var id: String
    var communityID: String
    var email: String
    var emailVerified: Bool
    var pendingEmail: String?
    var username: String
    var passwordHash: String?
    var roles: [String]
    var status: String
    var createdAt: PostgresTimestamp
    var lastSignInAt: PostgresTimestamp?
    var deactivatedAt: PostgresTimestamp?
    var deactivationNote: String?

    init(_ row: PostgresRow) throws {
        self.id = try row.decode(String.self, at: 0)
        self.communityID = try row.decode(String.self, at: 1)
        self.email = try row.decode(String?.self, at: 2) ?? ""
        self.emailVerified = try row.decode(Bool.self, at: 3)
        self.pendingEmail = try row.decode(String?.self, at: 4)
        self.username = try row.decode(String.self, at: 5)
        self.passwordHash = try row.decode(String?.self, at: 6)
        self.roles = try row.decode([String].self, at: 7)
        self.status = try row.decode(String.self, at: 8)
        self.createdAt = try row.decode(PostgresTimestamp.self, at: 9)
        self.lastSignInAt = try row.decode(PostgresTimestamp?.self, at: 10)
        self.deactivatedAt = try row.decode(PostgresTimestamp?.self, at: 11)
        self.deactivationNote = try row.decode(String?.self, at: 12)
    }

    func proto(forAdmin: Bool = false) -> Kindred.Auth.V1.Account {
        var account = Kindred.Auth.V1.Account()
        account.userId = self.id
        account.communityId = self.communityID
        account.email = self.email
        account.emailVerified = self.emailVerified
        account.pendingEmail = self.pendingEmail ?? ""
        account.username = self.username
        account.roles = self.roles.compactMap { role in
            switch role {
            case "user": .user
            case "admin": .admin
            default: nil
            }
        }
        account.status =
            switch self.status {
            case "pending": .pendingVerification
            case "deactivated": .deactivated
            default: .active
            }
        account.passwordSet = self.passwordHash != nil
        account.createdUnixMs = self.createdAt.millisecondsSinceEpoch
        account.lastSignInUnixMs = self.lastSignInAt?.millisecondsSinceEpoch ?? 0
        account.deactivatedUnixMs = self.deactivatedAt?.millisecondsSinceEpoch ?? 0
        if forAdmin { account.deactivationNote = self.deactivationNote ?? "" }
        return account
    }
}

extension PostgresTransaction {
    /// The account with `id`, locked for update.
    func lockAccount(id: String) async throws -> AccountRecord? {
        let rows = try await self.query(
            "SELECT \(unescaped: AccountRecord.columns) FROM accounts WHERE id = \(id) FOR UPDATE"
        )
        return try rows.first.map(AccountRecord.init)
    }

    /// Revokes every live session of an account (optionally keeping one); returns how many ended.
    func revokeSessions(accountID: String, except keep: String? = nil, reason: String) async throws -> Int {
        if let keep {
            return try await self.execute(
                """
                UPDATE sessions SET revoked_at = now(), revoke_reason = \(reason)
                WHERE account_id = \(accountID) AND revoked_at IS NULL AND id <> \(keep)
                """
            )
        }
        return try await self.execute(
            """
            UPDATE sessions SET revoked_at = now(), revoke_reason = \(reason)
            WHERE account_id = \(accountID) AND revoked_at IS NULL
            """
        )
    }
}

extension PostgresClient {
    func account(id: String) async throws -> AccountRecord? {
        let rows = try await self.query("SELECT \(unescaped: AccountRecord.columns) FROM accounts WHERE id = \(id)")
        return try rows.first.map(AccountRecord.init)
    }
}
