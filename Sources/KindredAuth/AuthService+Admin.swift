import KindredGRPC
import KindredIdentity
import KindredPostgres
import KindredProto

extension AuthService {
    func requireAdmin(_ context: ServerContext) async throws -> User {
        let user = try await self.requireUser(context)
        guard user.isAdmin else { throw AuthError(.permissionDenied, "Admins only") }
        return user
    }

    func deactivateAccount(
        _ request: Kindred.Auth.V1.DeactivateAccountRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.DeactivateAccountResponse {
        let admin = try await self.requireAdmin(context)
        let target = request.userId.lowercased()
        guard UUIDv7.isValid(target) else { throw AuthError.invalid("user_id", "INVALID_FORMAT", "a user id") }
        guard target != admin.userID else {
            throw AuthError(.failedPrecondition, "Admins cannot deactivate themselves")
        }
        guard (1...500).contains(request.note.count) else {
            throw AuthError.invalid("note", "OUT_OF_RANGE", "1..500 characters")
        }
        let account = try await self.database.withTransaction { transaction in
            guard let account = try await transaction.lockAccount(id: target) else {
                throw AuthError(.notFound, "No such account")
            }
            if account.status == "deactivated" { return account }
            let now = PostgresTimestamp.now
            try await transaction.execute(
                """
                UPDATE accounts SET status = 'deactivated', deactivated_at = \(now), deactivation_note = \(request.note)
                WHERE id = \(target)
                """
            )
            _ = try await transaction.revokeSessions(accountID: target, reason: "deactivated")
            var payload = Kindred.Common.V1.AccountDeactivated()
            payload.sessionsRevoked = true
            try await transaction.appendEvent(
                userID: target,
                communityID: account.communityID,
                payload: .accountDeactivated(payload),
                at: now
            )
            return try await transaction.lockAccount(id: target) ?? account
        }
        var response = Kindred.Auth.V1.DeactivateAccountResponse()
        response.account = account.proto(forAdmin: true)
        return response
    }

    func reactivateAccount(
        _ request: Kindred.Auth.V1.ReactivateAccountRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.ReactivateAccountResponse {
        _ = try await self.requireAdmin(context)
        let target = request.userId.lowercased()
        guard UUIDv7.isValid(target) else { throw AuthError.invalid("user_id", "INVALID_FORMAT", "a user id") }
        let account = try await self.database.withTransaction { transaction in
            guard let account = try await transaction.lockAccount(id: target) else {
                throw AuthError(.notFound, "No such account")
            }
            guard account.status == "deactivated" else { return account }
            let status = account.emailVerified ? "active" : "pending"
            try await transaction.execute(
                """
                UPDATE accounts SET status = \(status), deactivated_at = NULL, deactivation_note = NULL WHERE id = \(target)
                """
            )
            var payload = Kindred.Common.V1.AccountReactivated()
            payload.deactivatedSinceUnixMs = account.deactivatedAt?.millisecondsSinceEpoch ?? 0
            try await transaction.appendEvent(
                userID: target,
                communityID: account.communityID,
                payload: .accountReactivated(payload),
                at: .now
            )
            return try await transaction.lockAccount(id: target) ?? account
        }
        var response = Kindred.Auth.V1.ReactivateAccountResponse()
        response.account = account.proto(forAdmin: true)
        return response
    }

    func getUserFootprint(
        _ request: Kindred.Auth.V1.GetUserFootprintRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.GetUserFootprintResponse {
        let identity = try await self.authenticate(context)
        guard identity.isAdmin || identity.isService else {
            throw AuthError(.permissionDenied, "Admins and services only")
        }
        let target = request.userId.lowercased()
        guard UUIDv7.isValid(target) else { throw AuthError.invalid("user_id", "INVALID_FORMAT", "a user id") }
        let counts = try await Self.footprint(of: target, in: self.database)
        var response = Kindred.Auth.V1.GetUserFootprintResponse()
        response.counts = counts.map { kind, rows in
            var count = Kindred.Common.V1.DataCount()
            count.kind = kind
            count.rows = rows
            return count
        }
        return response
    }

    /// Rows auth holds about a user, per table (the events outbox is excluded: it carries the deletion itself).
    static func footprint(of userID: String, in database: PostgresClient) async throws -> [(String, Int64)] {
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
}
