import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit

extension AuthService {
    /// Proves the caller is the account holder right now (ChangeEmail, DeleteAccount): an access token alone is
    /// never enough. Accounts with a password give it (wrong ones count as sign-in failures); accounts without
    /// one need their current session to have been started by SignInWithIdToken within `recentSignInWindow`.
    func reauthenticate(_ user: User, account: AccountRecord, password: String, field: String) async throws {
        guard let hash = account.passwordHash else {
            guard password.isEmpty else {
                throw AuthError(.reauthenticationRequired, "The account has no password; sign in again with your provider")
            }
            let fresh = try await self.database.query(
                """
                SELECT 1 FROM sessions
                WHERE id = \(user.sessionID) AND account_id = \(user.userID) AND method IN ('google', 'apple')
                  AND created_at > now() - make_interval(secs => \(Double(self.configuration.recentSignInWindow)))
                """
            )
            guard !fresh.isEmpty else {
                throw AuthError(.reauthenticationRequired, "Sign in again with your provider, then retry")
            }
            return
        }
        guard !password.isEmpty else {
            throw AuthError(.reauthenticationRequired, "Enter your current password")
        }
        try Validation.presentedPassword(password, field: field)
        let key = "acct:" + account.id
        if let wait = self.limiter.signInDelay(
            key,
            free: self.configuration.signInFreeFailures,
            perHour: self.configuration.signInFailuresPerHour
        ) {
            throw AuthError.rateLimited(retryAfter: wait)
        }
        guard try await self.hasher.verify(password, encoded: hash) else {
            self.limiter.recordSignInFailure(key)
            throw AuthError(.invalidCredentials, "The password is wrong")
        }
    }

    func changePassword(
        _ request: Kindred.Auth.V1.ChangePasswordRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.ChangePasswordResponse {
        let user = try await self.requireUser(context)
        try Validation.presentedPassword(request.currentPassword, field: "current_password")
        try Validation.newPassword(request.newPassword, field: "new_password", common: self.commonPasswords)
        guard request.newPassword != request.currentPassword else {
            throw AuthError.invalid("new_password", "NOT_ALLOWED", "must differ from the current password")
        }
        guard let account = try await self.database.account(id: user.userID) else {
            throw AuthError(.unauthenticated, "The session has ended")
        }
        guard account.passwordHash != nil else {
            throw AuthError(.failedPrecondition, "The account has no password; use a password reset")
        }
        try await self.reauthenticate(
            user,
            account: account,
            password: request.currentPassword,
            field: "current_password"
        )
        let newHash = try await self.hasher.hash(request.newPassword)
        let ended = try await self.database.withTransaction { transaction in
            try await transaction.execute("UPDATE accounts SET password_hash = \(newHash) WHERE id = \(user.userID)")
            try await transaction.execute(
                "UPDATE email_tokens SET used_at = now() WHERE account_id = \(user.userID) AND purpose = 'reset_password' AND used_at IS NULL"
            )
            return try await transaction.revokeSessions(
                accountID: user.userID,
                except: user.sessionID,
                reason: "password_changed"
            )
        }
        var response = Kindred.Auth.V1.ChangePasswordResponse()
        response.endedSessions = Int32(ended)
        return response
    }

    func requestPasswordReset(
        _ request: Kindred.Auth.V1.RequestPasswordResetRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.RequestPasswordResetResponse {
        let community = try Validation.community(request.communityId)
        let email = try Validation.email(request.email)
        try self.acquireMailQuota(address: "\(community):\(email)", context: context)
        let (token, hash) = try OpaqueToken.generate()
        try await self.database.withTransaction { transaction in
            let rows = try await transaction.query(
                "SELECT id FROM accounts WHERE community_id = \(community) AND email = \(email) FOR UPDATE"
            )
            guard let row = rows.first else { return }
            let accountID = try row.decode(String.self, at: 0)
            try await transaction.execute(
                "UPDATE email_tokens SET used_at = now() WHERE account_id = \(accountID) AND purpose = 'reset_password' AND used_at IS NULL"
            )
            let expires = PostgresTimestamp.now.adding(seconds: self.configuration.resetTokenLifetime)
            try await transaction.execute(
                """
                INSERT INTO email_tokens (token_hash, account_id, purpose, expires_at)
                VALUES (\(hash), \(accountID), 'reset_password', \(expires))
                """
            )
            try await transaction.enqueue(self.mail.passwordReset(to: email, token: token), accountID: accountID)
        }
        self.mailRelayNudge()
        return .init()
    }

    private enum TokenOutcome<Value> {
        case done(Value)
        case invalid
        case emailTaken
    }

    func resetPassword(
        _ request: Kindred.Auth.V1.ResetPasswordRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.ResetPasswordResponse {
        let token = try Validation.token(request.token)
        try Validation.newPassword(request.newPassword, field: "new_password", common: self.commonPasswords)
        try self.acquireAddressQuota("reset", context: context)
        let hash = OpaqueToken.hash(token)
        let newHash = try await self.hasher.hash(request.newPassword)
        let outcome: TokenOutcome<(String, Int)> = try await self.database.withTransaction { transaction in
            let rows = try await transaction.query(
                """
                SELECT account_id FROM email_tokens
                WHERE token_hash = \(hash) AND purpose = 'reset_password' AND used_at IS NULL AND expires_at > now()
                FOR UPDATE
                """
            )
            guard let row = rows.first else { return .invalid }
            let accountID = try row.decode(String.self, at: 0)
            try await transaction.execute("UPDATE email_tokens SET used_at = now() WHERE token_hash = \(hash)")
            try await transaction.execute(
                """
                UPDATE accounts SET password_hash = \(newHash), email_verified = true,
                    status = CASE WHEN status = 'pending' THEN 'active' ELSE status END
                WHERE id = \(accountID)
                """
            )
            let ended = try await transaction.revokeSessions(accountID: accountID, reason: "password_reset")
            return .done((accountID, ended))
        }
        guard case .done(let (accountID, ended)) = outcome else {
            throw AuthError(.tokenInvalid, "The reset token is invalid, used or expired")
        }
        // A reset is the way out of a sign-in lockout.
        self.limiter.resetSignInFailures("acct:" + accountID)
        var response = Kindred.Auth.V1.ResetPasswordResponse()
        response.endedSessions = Int32(ended)
        return response
    }

    func changeEmail(
        _ request: Kindred.Auth.V1.ChangeEmailRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.ChangeEmailResponse {
        let user = try await self.requireUser(context)
        let newEmail = try Validation.email(request.newEmail, field: "new_email")
        guard let account = try await self.database.account(id: user.userID) else {
            throw AuthError(.unauthenticated, "The session has ended")
        }
        try await self.reauthenticate(
            user,
            account: account,
            password: request.currentPassword,
            field: "current_password"
        )
        try self.acquireMailQuota(address: "\(account.communityID):\(newEmail)", context: context)
        let (token, hash) = try OpaqueToken.generate()
        let expires = PostgresTimestamp.now.adding(seconds: self.configuration.emailChangeTokenLifetime)
        try await self.database.withTransaction { transaction in
            let taken = try await transaction.query(
                "SELECT id FROM accounts WHERE community_id = \(account.communityID) AND email = \(newEmail)"
            )
            try await transaction.execute(
                "UPDATE email_tokens SET used_at = now() WHERE account_id = \(account.id) AND purpose = 'change_email' AND used_at IS NULL"
            )
            if taken.isEmpty {
                try await transaction.execute(
                    """
                    INSERT INTO email_tokens (token_hash, account_id, purpose, new_email, expires_at)
                    VALUES (\(hash), \(account.id), 'change_email', \(newEmail), \(expires))
                    """
                )
                try await transaction.execute(
                    "UPDATE accounts SET pending_email = \(newEmail) WHERE id = \(account.id)"
                )
                try await transaction.enqueue(
                    self.mail.emailChangeConfirmation(to: newEmail, token: token),
                    accountID: account.id
                )
            } else if try taken[0].decode(String.self, at: 0) != account.id {
                try await transaction.enqueue(self.mail.addressInUseNotice(to: newEmail), accountID: nil)
            }
            try await transaction.enqueue(self.mail.emailChangeNotice(to: account.email), accountID: account.id)
        }
        self.mailRelayNudge()
        var response = Kindred.Auth.V1.ChangeEmailResponse()
        response.pendingEmail = newEmail
        response.expiresUnixMs = expires.millisecondsSinceEpoch
        return response
    }

    func confirmEmailChange(
        _ request: Kindred.Auth.V1.ConfirmEmailChangeRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.ConfirmEmailChangeResponse {
        let token = try Validation.token(request.token)
        try self.acquireAddressQuota("confirm-email", context: context)
        let hash = OpaqueToken.hash(token)
        let outcome: TokenOutcome<String> = try await self.database.withTransaction { transaction in
            let rows = try await transaction.query(
                """
                SELECT t.account_id, t.new_email, a.community_id FROM email_tokens t JOIN accounts a ON a.id = t.account_id
                WHERE t.token_hash = \(hash) AND t.purpose = 'change_email' AND t.used_at IS NULL AND t.expires_at > now()
                FOR UPDATE OF t, a
                """
            )
            guard let row = rows.first else { return .invalid }
            let (accountID, newEmail, community) = try row.decode((String, String, String).self)
            let taken = try await transaction.query(
                "SELECT 1 FROM accounts WHERE community_id = \(community) AND email = \(newEmail) AND id <> \(accountID)"
            )
            guard taken.isEmpty else { return .emailTaken }
            try await transaction.execute("UPDATE email_tokens SET used_at = now() WHERE token_hash = \(hash)")
            try await transaction.execute(
                """
                UPDATE accounts SET email = \(newEmail), pending_email = NULL, email_verified = true,
                    status = CASE WHEN status = 'pending' THEN 'active' ELSE status END
                WHERE id = \(accountID)
                """
            )
            return .done(newEmail)
        }
        switch outcome {
        case .done(let email):
            var response = Kindred.Auth.V1.ConfirmEmailChangeResponse()
            response.email = email
            return response
        case .invalid: throw AuthError(.tokenInvalid, "The confirmation token is invalid, used or expired")
        case .emailTaken: throw AuthError(.emailTaken, "The address is already in use")
        }
    }

    func changeUsername(
        _ request: Kindred.Auth.V1.ChangeUsernameRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.ChangeUsernameResponse {
        let user = try await self.requireUser(context)
        let username = try Validation.username(request.newUsername, field: "new_username")
        try await self.database.withTransaction { transaction in
            guard let account = try await transaction.lockAccount(id: user.userID) else {
                throw AuthError(.unauthenticated, "The session has ended")
            }
            if account.username == username { return }
            let recent = try await transaction.query(
                "SELECT username_changed_at FROM accounts WHERE id = \(user.userID) AND username_changed_at > now() - interval '24 hours'"
            )
            if let row = recent.first {
                let changed = try row.decode(PostgresTimestamp.self, at: 0)
                let waitMs = changed.millisecondsSinceEpoch + 86_400_000 - PostgresTimestamp.now.millisecondsSinceEpoch
                throw AuthError.rateLimited(retryAfter: .milliseconds(max(1, waitMs)))
            }
            do {
                try await transaction.execute(
                    "UPDATE accounts SET username = \(username), username_changed_at = now() WHERE id = \(user.userID)"
                )
            } catch let error as PostgresError where error.code == .uniqueViolation {
                throw AuthError(.usernameTaken, "The username is taken")
            }
        }
        var response = Kindred.Auth.V1.ChangeUsernameResponse()
        response.username = username
        return response
    }

    func deleteAccount(
        _ request: Kindred.Auth.V1.DeleteAccountRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.DeleteAccountResponse {
        let user = try await self.requireUser(context)
        let target = request.userId.isEmpty ? user.userID : request.userId.lowercased()
        guard UUIDv7.isValid(target) else { throw AuthError.invalid("user_id", "INVALID_FORMAT", "a user id") }
        let byUser = target == user.userID
        if byUser {
            guard let account = try await self.database.account(id: target) else {
                throw AuthError(.unauthenticated, "The session has ended")
            }
            try await self.reauthenticate(
                user,
                account: account,
                password: request.currentPassword,
                field: "current_password"
            )
        } else {
            guard user.isAdmin else { throw AuthError(.permissionDenied, "Only admins can delete other accounts") }
        }
        let deletedAt = PostgresTimestamp.now
        try await self.database.withTransaction { transaction in
            guard let account = try await transaction.lockAccount(id: target) else { return }  // already deleted
            var payload = Kindred.Common.V1.AccountDeleted()
            payload.requestedByUser = byUser
            try await transaction.appendEvent(
                userID: account.id,
                communityID: account.communityID,
                payload: .accountDeleted(payload),
                at: deletedAt
            )
            // Sessions, refresh tokens, email tokens, identities and queued mail go with it (ON DELETE CASCADE).
            try await transaction.execute("DELETE FROM accounts WHERE id = \(account.id)")
        }
        var response = Kindred.Auth.V1.DeleteAccountResponse()
        response.deletedUnixMs = deletedAt.millisecondsSinceEpoch
        return response
    }
}

extension PostgresTransaction {
    /// Writes a `kindred.common.v1.Event` about an account into the events outbox (the service kit's `Outbox`,
    /// delivered by its `OutboxRelay`), in the caller's transaction.
    func appendEvent(
        userID: String,
        communityID: String,
        payload: Kindred.Common.V1.Event.Payload,
        at time: PostgresTimestamp
    ) async throws {
        var event = Kindred.Common.V1.Event()
        event.userId = userID
        event.communityId = communityID
        event.occurredUnixMs = time.millisecondsSinceEpoch
        event.payload = payload
        try await Outbox(producer: "auth").append(event, in: self)
    }
}
