import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit

extension AuthService {
    /// Proves the caller is the account holder right now (ChangeEmail, DeleteAccount): an access token alone is
    /// never enough. Accounts with a password give it (wrong ones count as sign-in failures); accounts without
    /// one need their current session to have been started by SignInWithIdToken within `recentSignInWindow`.
    func reauthenticate(
        _ user: SignedInUser,
        account: AccountRecord,
        password: String,
        field: String,
        context: ServerContext
    ) async throws {
        guard let hash = account.passwordHash else {
            guard password.isEmpty else {
                throw AuthError(
                    .reauthenticationRequired,
                    "The account has no password; sign in again with your provider"
                )
            }
            let fresh = try await self.sessions.isRecentProviderSession(
                sessionID: user.sessionID,
                accountID: user.id,
                within: self.configuration.recentSignInWindow,
                in: self.database
            )
            guard fresh else {
                throw AuthError(.reauthenticationRequired, "Sign in again with your provider, then retry")
            }
            return
        }
        guard !password.isEmpty else {
            throw AuthError(.reauthenticationRequired, "Enter your current password")
        }
        try Validation.presentedPassword(password, field: field)
        let subject = "acct:" + account.id
        let address = self.clientAddress(context)
        if let wait = self.limiter.signIns.delay(
            subject: subject,
            address: address,
            free: self.configuration.signInFreeFailures,
            perHour: self.configuration.signInFailuresPerHour
        ) {
            throw AuthError.rateLimited(retryAfter: wait)
        }
        guard try await self.hasher.verify(password, encoded: hash) else {
            self.limiter.signIns.recordFailure(subject: subject, address: address)
            throw AuthError(.invalidCredentials, "The password is wrong")
        }
    }

    func changePassword(
        _ request: Kindred.Auth.V1.ChangePasswordRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.ChangePasswordResponse {
        let user = try await self.requireLiveUser(context)
        try Validation.presentedPassword(request.currentPassword, field: "current_password")
        try Validation.newPassword(request.newPassword, field: "new_password", common: self.commonPasswords)
        guard request.newPassword != request.currentPassword else {
            throw AuthError.invalid("new_password", "NOT_ALLOWED", "must differ from the current password")
        }
        guard let account = try await self.accounts.find(id: user.id, in: self.database) else {
            throw AuthError(.unauthenticated, "The session has ended")
        }
        guard account.passwordHash != nil else {
            throw AuthError(.failedPrecondition, "The account has no password; use a password reset")
        }
        try await self.reauthenticate(
            user,
            account: account,
            password: request.currentPassword,
            field: "current_password",
            context: context
        )
        let newHash = try await self.hasher.hash(request.newPassword)
        let ended = try await self.database.withTransaction { transaction in
            try await self.accounts.setPasswordHash(newHash, id: user.id, in: transaction)
            try await self.emailTokens.invalidate(accountID: user.id, purpose: .resetPassword, in: transaction)
            return try await self.sessions.endAll(
                accountID: user.id,
                except: user.sessionID,
                reason: .passwordChanged,
                in: transaction
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
            guard
                let (accountID, _, locale) = try await self.accounts.lock(
                    community: community,
                    email: email,
                    in: transaction
                )
            else { return }
            try await self.emailTokens.invalidate(accountID: accountID, purpose: .resetPassword, in: transaction)
            try await self.emailTokens.create(
                hash: hash,
                accountID: accountID,
                purpose: .resetPassword,
                expiresAt: PostgresTimestamp.now.adding(seconds: self.configuration.resetTokenLifetime),
                in: transaction
            )
            try await self.mailOutbox.enqueue(
                self.mail.passwordReset(to: email, locale: locale, token: token),
                accountID: accountID,
                in: transaction
            )
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
            guard let accountID = try await self.emailTokens.lockPasswordReset(hash: hash, in: transaction) else {
                return .invalid
            }
            try await self.emailTokens.markUsed(hash: hash, in: transaction)
            // The reset link reached the address, so it is verified too.
            try await self.accounts.setPasswordHash(newHash, id: accountID, in: transaction)
            try await self.accounts.markEmailVerified(id: accountID, in: transaction)
            let ended = try await self.sessions.endAll(accountID: accountID, reason: .passwordReset, in: transaction)
            return .done((accountID, ended))
        }
        guard case .done(let (accountID, ended)) = outcome else {
            throw AuthError(.tokenInvalid, "The reset token is invalid, used or expired")
        }
        // A reset is the way out of a sign-in lockout.
        self.limiter.signIns.reset(subject: "acct:" + accountID)
        var response = Kindred.Auth.V1.ResetPasswordResponse()
        response.endedSessions = Int32(ended)
        return response
    }

    func changeEmail(
        _ request: Kindred.Auth.V1.ChangeEmailRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.ChangeEmailResponse {
        let user = try await self.requireLiveUser(context)
        let newEmail = try Validation.email(request.newEmail, field: "new_email")
        guard let account = try await self.accounts.find(id: user.id, in: self.database) else {
            throw AuthError(.unauthenticated, "The session has ended")
        }
        try await self.reauthenticate(
            user,
            account: account,
            password: request.currentPassword,
            field: "current_password",
            context: context
        )
        try self.acquireMailQuota(address: "\(account.communityID):\(newEmail)", context: context)
        let (token, hash) = try OpaqueToken.generate()
        let expires = PostgresTimestamp.now.adding(seconds: self.configuration.emailChangeTokenLifetime)
        try await self.database.withTransaction { transaction in
            let holder = try await self.accounts.emailHolder(
                community: account.communityID,
                email: newEmail,
                in: transaction
            )
            try await self.emailTokens.invalidate(accountID: account.id, purpose: .changeEmail, in: transaction)
            if holder == nil {
                try await self.emailTokens.create(
                    hash: hash,
                    accountID: account.id,
                    purpose: .changeEmail,
                    newEmail: newEmail,
                    expiresAt: expires,
                    in: transaction
                )
                try await self.accounts.setPendingEmail(newEmail, id: account.id, in: transaction)
                try await self.mailOutbox.enqueue(
                    self.mail.emailChangeConfirmation(to: newEmail, locale: account.locale, token: token),
                    accountID: account.id,
                    in: transaction
                )
            } else if let holder, holder.id != account.id {
                try await self.mailOutbox.enqueue(
                    self.mail.addressInUseNotice(to: newEmail, locale: holder.locale),
                    accountID: nil,
                    in: transaction
                )
            }
            try await self.mailOutbox.enqueue(
                self.mail.emailChangeNotice(to: account.email, locale: account.locale),
                accountID: account.id,
                in: transaction
            )
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
            guard
                let (accountID, newEmail, community) = try await self.emailTokens.lockEmailChange(
                    hash: hash,
                    in: transaction
                )
            else { return .invalid }
            let holder = try await self.accounts.emailHolder(community: community, email: newEmail, in: transaction)
            guard holder == nil || holder?.id == accountID else { return .emailTaken }
            try await self.emailTokens.markUsed(hash: hash, in: transaction)
            try await self.accounts.confirmEmail(newEmail, id: accountID, in: transaction)
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
        let user = try await self.requireLiveUser(context)
        let username = try Validation.username(request.newUsername, field: "new_username")
        try await self.database.withTransaction { transaction in
            guard let account = try await self.accounts.lock(id: user.id, in: transaction) else {
                throw AuthError(.unauthenticated, "The session has ended")
            }
            if account.username == username { return }
            if let changed = try await self.accounts.recentUsernameChange(id: user.id, in: transaction) {
                let waitMs = changed.millisecondsSinceEpoch + 86_400_000 - PostgresTimestamp.now.millisecondsSinceEpoch
                throw AuthError.rateLimited(retryAfter: .milliseconds(max(1, waitMs)))
            }
            try await self.accounts.setUsername(username, id: user.id, in: transaction)
        }
        var response = Kindred.Auth.V1.ChangeUsernameResponse()
        response.username = username
        return response
    }

    func deleteAccount(
        _ request: Kindred.Auth.V1.DeleteAccountRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.DeleteAccountResponse {
        let user = try await self.requireLiveUser(context)
        let target = request.userId.isEmpty ? user.id : request.userId.lowercased()
        guard UUIDv7.isValid(target) else { throw AuthError.invalid("user_id", "INVALID_FORMAT", "a user id") }
        let byUser = target == user.id
        if byUser {
            guard let account = try await self.accounts.find(id: target, in: self.database) else {
                throw AuthError(.unauthenticated, "The session has ended")
            }
            try await self.reauthenticate(
                user,
                account: account,
                password: request.currentPassword,
                field: "current_password",
                context: context
            )
        } else {
            guard user.isAdmin else { throw AuthError(.permissionDenied, "Only admins can delete other accounts") }
        }
        let deletedAt = PostgresTimestamp.now
        try await self.database.withTransaction { transaction in
            guard let account = try await self.accounts.lock(id: target, in: transaction) else { return }  // already deleted
            var payload = Kindred.Common.V1.AccountDeleted()
            payload.requestedByUser = byUser
            try await transaction.appendEvent(
                userID: account.id,
                communityID: account.communityID,
                payload: .accountDeleted(payload),
                at: deletedAt
            )
            try await self.accounts.delete(id: account.id, in: transaction)
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
