import KindredPostgres
import KindredProto

/// `accounts.status` (the migration's CHECK lists the same three values).
enum AccountStatus: String, Sendable {
    /// Signed up, email not yet verified: cannot sign in.
    case pending
    case active
    /// Ended by an admin: cannot sign in or refresh, sessions revoked.
    case deactivated

    /// A stored value; anything else means the schema and the code disagree.
    init(stored: String) throws {
        guard let status = AccountStatus(rawValue: stored) else {
            throw PostgresError(code: .decodingFailed, reason: "unknown accounts.status value")
        }
        self = status
    }

    var proto: Kindred.Auth.V1.AccountStatus {
        switch self {
        case .pending: .pendingVerification
        case .active: .active
        case .deactivated: .deactivated
        }
    }
}

/// One `accounts` row as the handlers need it. `passwordHash` never leaves the service.
struct AccountRecord: Sendable {
    static let columns = """
        id, community_id, email, email_verified, pending_email, username, password_hash, roles, status, \
        created_at, last_sign_in_at, deactivated_at, deactivation_note, locale
        """

    var id: String
    var communityID: String
    var email: String
    var emailVerified: Bool
    var pendingEmail: String?
    var username: String
    var passwordHash: String?
    var roles: [String]
    var status: AccountStatus
    var createdAt: PostgresTimestamp
    var lastSignInAt: PostgresTimestamp?
    var deactivatedAt: PostgresTimestamp?
    var deactivationNote: String?
    /// The BCP 47 tag given at sign-up: the language of the account's mails.
    var locale: String

    init(_ row: PostgresRow) throws {
        self.id = try row.decode(String.self, at: 0)
        self.communityID = try row.decode(String.self, at: 1)
        self.email = try row.decode(String?.self, at: 2) ?? ""
        self.emailVerified = try row.decode(Bool.self, at: 3)
        self.pendingEmail = try row.decode(String?.self, at: 4)
        self.username = try row.decode(String.self, at: 5)
        self.passwordHash = try row.decode(String?.self, at: 6)
        self.roles = try row.decode([String].self, at: 7)
        self.status = try AccountStatus(stored: row.decode(String.self, at: 8))
        self.createdAt = try row.decode(PostgresTimestamp.self, at: 9)
        self.lastSignInAt = try row.decode(PostgresTimestamp?.self, at: 10)
        self.deactivatedAt = try row.decode(PostgresTimestamp?.self, at: 11)
        self.deactivationNote = try row.decode(String?.self, at: 12)
        self.locale = try row.decode(String.self, at: 13)
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
        account.status = self.status.proto
        account.passwordSet = self.passwordHash != nil
        account.createdUnixMs = self.createdAt.millisecondsSinceEpoch
        account.lastSignInUnixMs = self.lastSignInAt?.millisecondsSinceEpoch ?? 0
        account.deactivatedUnixMs = self.deactivatedAt?.millisecondsSinceEpoch ?? 0
        if forAdmin { account.deactivationNote = self.deactivationNote ?? "" }
        return account
    }
}
