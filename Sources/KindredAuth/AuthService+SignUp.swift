import KindredGRPC
import KindredOpenSSL
import KindredPostgres
import KindredProto

extension AuthService {
    /// Limits for RPCs that send mail: per address (1 per minute, `mailsPerAddressPerDay` per day) and per
    /// client address. The same for addresses with and without an account.
    func acquireMailQuota(address: String, context: ServerContext) throws {
        let ip = self.clientAddress(context)
        if let wait = self.limiter.acquire([
            ("mail-min:" + address, 1, 60),
            ("mail-day:" + address, self.configuration.mailsPerAddressPerDay, 86_400),
            ("mail-ip:" + ip, self.configuration.mailsPerIPPerHour, 3600),
        ]) {
            throw AuthError.rateLimited(retryAfter: wait)
        }
    }

    func acquireAddressQuota(_ bucket: String, context: ServerContext) throws {
        let ip = self.clientAddress(context)
        if let wait = self.limiter.acquire("\(bucket):" + ip, limit: self.configuration.ipRequestsPerMinute, window: 60)
        {
            throw AuthError.rateLimited(retryAfter: wait)
        }
    }

    /// Replaces the account's pending verification tokens by a new one and queues the mail.
    func issueVerification(_ transaction: PostgresTransaction, accountID: String, email: String) async throws {
        try await transaction.execute(
            "UPDATE email_tokens SET used_at = now() WHERE account_id = \(accountID) AND purpose = 'verify_email' AND used_at IS NULL"
        )
        let (token, hash) = try OpaqueToken.generate()
        let code = try EmailCodeSecret.generate()
        let expires = PostgresTimestamp.now.adding(seconds: self.configuration.verifyEmailTokenLifetime)
        try await transaction.execute(
            """
            INSERT INTO email_tokens (token_hash, account_id, purpose, code_hash, expires_at)
            VALUES (\(hash), \(accountID), 'verify_email', \(EmailCodeSecret.hash(accountID: accountID, code: code)), \(expires))
            """
        )
        try await transaction.enqueue(self.mail.verification(to: email, token: token, code: code), accountID: accountID)
    }

    /// When `email` has an account in `community`: a new verification mail if it is pending, else a notice that it
    /// is already registered. Returns whether it had one.
    private func mailExistingAccount(_ transaction: PostgresTransaction, community: String, email: String) async throws
        -> Bool
    {
        let existing = try await transaction.query(
            "SELECT id, status FROM accounts WHERE community_id = \(community) AND email = \(email) FOR UPDATE"
        )
        guard let row = existing.first else { return false }
        let (id, status) = try row.decode((String, String).self)
        if status == "pending" {
            try await self.issueVerification(transaction, accountID: id, email: email)
        } else {
            try await transaction.enqueue(self.mail.alreadyRegistered(to: email), accountID: id)
        }
        return true
    }

    func signUp(_ request: Kindred.Auth.V1.SignUpRequest, _ context: ServerContext) async throws
        -> Kindred.Auth.V1.SignUpResponse
    {
        let community = try Validation.community(request.communityId)
        let email = try Validation.email(request.email)
        let username = try Validation.username(request.username)
        try Validation.newPassword(request.password, field: "password", common: self.commonPasswords)
        guard request.locale.count <= 35 else { throw AuthError.invalid("locale", "TOO_LONG", "at most 35 characters") }
        try self.acquireAddressQuota("signup", context: context)
        try self.acquireMailQuota(address: "\(community):\(email)", context: context)

        // Anti-enumeration: the answer depends only on whether the username is taken, never on whether the email
        // has an account, and every path does exactly one Argon2 computation (a verification when the username
        // is taken, a hash when it is free), so the timing tells nothing either.
        let holders = try await self.database.query(
            "SELECT email, password_hash FROM accounts WHERE community_id = \(community) AND username = \(username)"
        )
        if let holder = holders.first {
            let (holderEmail, holderHash) = try holder.decode((String?, String?).self)
            // The owner retrying their own sign-up (same email and password) gets OK: the write is idempotent.
            let owner = try await self.hasher.verify(request.password, encoded: holderHash)
            guard owner, holderEmail == email else { throw AuthError(.usernameTaken, "The username is taken") }
            try await self.database.withTransaction { transaction in
                _ = try await self.mailExistingAccount(transaction, community: community, email: email)
            }
            self.mailRelayNudge()
            var response = Kindred.Auth.V1.SignUpResponse()
            response.resendAfterSeconds = 60
            return response
        }
        let passwordHash = try await self.hasher.hash(request.password)
        let accountID = try UUIDv7.generate()
        try await self.database.withTransaction { transaction in
            if try await self.mailExistingAccount(transaction, community: community, email: email) { return }
            do {
                try await transaction.execute(
                    """
                    INSERT INTO accounts (id, community_id, email, username, password_hash, status, locale)
                    VALUES (\(accountID), \(community), \(email), \(username), \(passwordHash), 'pending',
                            \(request.locale.isEmpty ? "en" : request.locale))
                    """
                )
            } catch let error as PostgresError where error.code == .uniqueViolation {
                // Taken meanwhile (a concurrent sign-up): the same answer as a taken username above.
                throw error.constraint?.contains("username") == true
                    ? AuthError(.usernameTaken, "The username is taken") : error
            }
            try await self.issueVerification(transaction, accountID: accountID, email: email)
        }
        self.mailRelayNudge()
        var response = Kindred.Auth.V1.SignUpResponse()
        response.resendAfterSeconds = 60
        return response
    }

    private enum VerifyOutcome {
        case verified(String)
        case invalid
        case wrongCode
        case tooManyAttempts
    }

    func verifyEmail(
        _ request: Kindred.Auth.V1.VerifyEmailRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.VerifyEmailResponse {
        try self.acquireAddressQuota("verify", context: context)
        let outcome: VerifyOutcome
        switch request.proof {
        case .token(let raw)?:
            let hash = OpaqueToken.hash(try Validation.token(raw))
            outcome = try await self.database.withTransaction { transaction in
                let rows = try await transaction.query(
                    """
                    SELECT t.account_id, t.expires_at > now(), t.used_at IS NOT NULL, a.email_verified, a.email
                    FROM email_tokens t JOIN accounts a ON a.id = t.account_id
                    WHERE t.token_hash = \(hash) AND t.purpose = 'verify_email' FOR UPDATE
                    """
                )
                guard let row = rows.first else { return .invalid }
                let (accountID, live, used, verified, email) = try row.decode((String, Bool, Bool, Bool, String).self)
                if used { return verified ? .verified(email) : .invalid }
                guard live else { return .invalid }
                return try await self.markVerified(transaction, accountID: accountID, tokenHash: hash, email: email)
            }
        case .code(let code)?:
            let community = try Validation.community(code.communityId, field: "code.community_id")
            let email = try Validation.email(code.email, field: "code.email")
            guard code.code.count == 6, code.code.allSatisfy(\.isASCII), code.code.allSatisfy(\.isNumber) else {
                throw AuthError.invalid("code.code", "INVALID_FORMAT", "exactly 6 digits")
            }
            outcome = try await self.database.withTransaction { transaction in
                let rows = try await transaction.query(
                    """
                    SELECT t.token_hash, t.account_id, t.code_hash, t.code_attempts
                    FROM email_tokens t JOIN accounts a ON a.id = t.account_id
                    WHERE a.community_id = \(community) AND a.email = \(email) AND t.purpose = 'verify_email'
                      AND t.used_at IS NULL AND t.expires_at > now()
                    ORDER BY t.created_at DESC LIMIT 1 FOR UPDATE OF t
                    """
                )
                guard let row = rows.first else { return .invalid }
                let (tokenHash, accountID, codeHash, attempts) = try row.decode(([UInt8], String, [UInt8], Int32).self)
                guard attempts < 5 else { return .tooManyAttempts }
                guard ConstantTime.equals(codeHash, EmailCodeSecret.hash(accountID: accountID, code: code.code)) else {
                    try await transaction.execute(
                        "UPDATE email_tokens SET code_attempts = code_attempts + 1 WHERE token_hash = \(tokenHash)"
                    )
                    return .wrongCode
                }
                return try await self.markVerified(
                    transaction,
                    accountID: accountID,
                    tokenHash: tokenHash,
                    email: email
                )
            }
        case nil:
            throw AuthError.invalid("proof", "REQUIRED", "a token or a code")
        }
        switch outcome {
        case .verified(let email):
            var response = Kindred.Auth.V1.VerifyEmailResponse()
            response.email = email
            return response
        case .invalid, .wrongCode:
            throw AuthError(.tokenInvalid, "The verification token or code is invalid or expired")
        case .tooManyAttempts:
            throw AuthError.rateLimited(retryAfter: .seconds(3600))
        }
    }

    private func markVerified(
        _ transaction: PostgresTransaction,
        accountID: String,
        tokenHash: [UInt8],
        email: String
    ) async throws -> VerifyOutcome {
        try await transaction.execute("UPDATE email_tokens SET used_at = now() WHERE token_hash = \(tokenHash)")
        try await transaction.execute(
            """
            UPDATE accounts SET email_verified = true,
                status = CASE WHEN status = 'pending' THEN 'active' ELSE status END
            WHERE id = \(accountID)
            """
        )
        return .verified(email)
    }

    func resendVerification(
        _ request: Kindred.Auth.V1.ResendVerificationRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.ResendVerificationResponse {
        let community = try Validation.community(request.communityId)
        let email = try Validation.email(request.email)
        try self.acquireMailQuota(address: "\(community):\(email)", context: context)
        try await self.database.withTransaction { transaction in
            let rows = try await transaction.query(
                "SELECT id FROM accounts WHERE community_id = \(community) AND email = \(email) AND status = 'pending' FOR UPDATE"
            )
            if let row = rows.first {
                try await self.issueVerification(
                    transaction,
                    accountID: try row.decode(String.self, at: 0),
                    email: email
                )
            }
        }
        self.mailRelayNudge()
        var response = Kindred.Auth.V1.ResendVerificationResponse()
        response.resendAfterSeconds = 60
        return response
    }

    func checkUsername(
        _ request: Kindred.Auth.V1.CheckUsernameRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.CheckUsernameResponse {
        let community = try Validation.community(request.communityId)
        // The contract's bound, checked before anything else: longer input is refused, never echoed.
        guard (1...64).contains(request.username.count) else {
            throw AuthError.invalid("username", "OUT_OF_RANGE", "1..64 characters")
        }
        try self.acquireAddressQuota("check-username", context: context)
        var response = Kindred.Auth.V1.CheckUsernameResponse()
        response.normalizedUsername = request.username.lowercased()
        guard let username = try? Validation.username(request.username) else {
            response.unavailableReason = "INVALID_FORMAT"
            return response
        }
        let rows = try await self.database.query(
            "SELECT 1 FROM accounts WHERE community_id = \(community) AND username = \(username)"
        )
        response.available = rows.isEmpty
        response.unavailableReason = rows.isEmpty ? "" : "TAKEN"
        return response
    }
}
