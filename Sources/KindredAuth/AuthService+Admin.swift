import KindredGRPC
import KindredIdentity
import KindredPostgres
import KindredProto
import KindredServiceKit

extension AuthService {
    func deactivateAccount(
        _ request: Kindred.Auth.V1.DeactivateAccountRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.DeactivateAccountResponse {
        let admin = try await self.requireLiveUser(context, admin: true)
        let target = request.userId.lowercased()
        guard UUIDv7.isValid(target) else { throw AuthError.invalid("user_id", "INVALID_FORMAT", "a user id") }
        guard target != admin.id else {
            throw AuthError(.failedPrecondition, "Admins cannot deactivate themselves")
        }
        let note = try TextRule.adminNote.validate(request.note, field: "note", as: AuthError.init)
        guard !note.isEmpty else { throw AuthError.invalid("note", "REQUIRED", TextRule.adminNote.hint) }
        let account = try await self.database.withTransaction { transaction in
            guard let account = try await self.accounts.lock(id: target, in: transaction) else {
                throw AuthError(.notFound, "No such account")
            }
            if account.status == .deactivated { return account }
            let now = PostgresTimestamp.now
            try await self.accounts.deactivate(id: target, note: note, at: now, in: transaction)
            _ = try await self.sessions.endAll(accountID: target, reason: .deactivated, in: transaction)
            var payload = Kindred.Common.V1.AccountDeactivated()
            payload.sessionsRevoked = true
            try await transaction.appendEvent(
                userID: target,
                communityID: account.communityID,
                payload: .accountDeactivated(payload),
                at: now
            )
            return try await self.accounts.lock(id: target, in: transaction) ?? account
        }
        var response = Kindred.Auth.V1.DeactivateAccountResponse()
        response.account = account.proto(forAdmin: true)
        return response
    }

    func reactivateAccount(
        _ request: Kindred.Auth.V1.ReactivateAccountRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.ReactivateAccountResponse {
        _ = try await self.requireLiveUser(context, admin: true)
        let target = request.userId.lowercased()
        guard UUIDv7.isValid(target) else { throw AuthError.invalid("user_id", "INVALID_FORMAT", "a user id") }
        let account = try await self.database.withTransaction { transaction in
            guard let account = try await self.accounts.lock(id: target, in: transaction) else {
                throw AuthError(.notFound, "No such account")
            }
            guard account.status == .deactivated else { return account }
            try await self.accounts.reactivate(
                id: target,
                as: account.emailVerified ? .active : .pending,
                in: transaction
            )
            var payload = Kindred.Common.V1.AccountReactivated()
            payload.deactivatedSinceUnixMs = account.deactivatedAt?.millisecondsSinceEpoch ?? 0
            try await transaction.appendEvent(
                userID: target,
                communityID: account.communityID,
                payload: .accountReactivated(payload),
                at: .now
            )
            return try await self.accounts.lock(id: target, in: transaction) ?? account
        }
        var response = Kindred.Auth.V1.ReactivateAccountResponse()
        response.account = account.proto(forAdmin: true)
        return response
    }

    func getUserFootprint(
        _ request: Kindred.Common.V1.GetUserFootprintRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Common.V1.GetUserFootprintResponse {
        try await self.access.requireAdminOrService(context)
        let target = request.userId.lowercased()
        guard UUIDv7.isValid(target) else { throw AuthError.invalid("user_id", "INVALID_FORMAT", "a user id") }
        return .init(counts: try await self.accounts.footprint(of: target, in: self.database))
    }

}
