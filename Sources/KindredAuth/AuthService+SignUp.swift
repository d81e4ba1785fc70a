import KindredGRPC
import KindredGRPCServices
import KindredOpenSSL
import KindredPostgres
import KindredProto
import KindredServiceKit

extension AuthService {
    /// Limits for RPCs that send mail, all or nothing: per address a bucket of 1 refilled each minute and one of
    /// `mailsPerAddressPerDay` refilled over a day, and per client address one of `mailsPerIPPerHour` refilled
    /// over an hour. The same for addresses with and without an account.
    func acquireMailQuota(address: String, context: ServerContext) throws {
        let ip = self.clientAddress(context)
        if let wait = self.limiter.buckets.acquire([
            ("mail-min:" + address, .perWindow(1, seconds: 60)),
            ("mail-day:" + address, .perWindow(self.configuration.mailsPerAddressPerDay, seconds: 86_400)),
            ("mail-ip:" + ip, .perWindow(self.configuration.mailsPerIPPerHour, seconds: 3600)),
        ]) {
            throw AuthError.rateLimited(retryAfter: wait)
        }
    }

    /// Per client address and RPC group: a bucket of `ipRequestsPerMinute` refilled over a minute.
    func acquireAddressQuota(_ bucket: String, context: ServerContext) throws {
        let ip = self.clientAddress(context)
        let limit = TokenBucketLimit.perWindow(self.configuration.ipRequestsPerMinute, seconds: 60)
        if let wait = self.limiter.buckets.acquire([("\(bucket):" + ip, limit)]) {
            throw AuthError.rateLimited(retryAfter: wait)
        }
    }

    /// Replaces the account's pending verification tokens by a new one and queues the mail (in `locale`).
    func issueVerification(_ transaction: PostgresTransaction, accountID: String, email: String, locale: String)
        async throws
    {
        try await self.emailTokens.invalidate(accountID: accountID, purpose: .verifyEmail, in: transaction)
        let (token, hash) = try OpaqueToken.generate()
        let code = try EmailCodeSecret.generate()
        try await self.emailTokens.create(
            hash: hash,
            accountID: accountID,
            purpose: .verifyEmail,
            codeHash: EmailCodeSecret.hash(accountID: accountID, code: code),
            expiresAt: PostgresTimestamp.now.adding(seconds: self.configuration.verifyEmailTokenLifetime),
            in: transaction
        )
        try await self.mailOutbox.enqueue(
            self.mail.verification(to: email, locale: locale, token: token, code: code),
            accountID: accountID,
            in: transaction
        )
    }

    /// When `email` has an account in `community`: a new verification mail if it is pending, else a notice that it
    /// is already registered. Returns whether it had one.
    private func mailExistingAccount(_ transaction: PostgresTransaction, community: String, email: String) async throws
        -> Bool
    {
        guard
            let (id, status, locale) = try await self.accounts.lock(community: community, email: email, in: transaction)
        else { return false }
        if status == .pending {
            try await self.issueVerification(transaction, accountID: id, email: email, locale: locale)
        } else {
            try await self.mailOutbox.enqueue(
                self.mail.alreadyRegistered(to: email, locale: locale),
                accountID: id,
                in: transaction
            )
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
        _ = try TextRule.locale.validate(request.locale, field: "locale", as: AuthError.init)
        try self.acquireAddressQuota("signup", context: context)
        try await self.requireSignUpsOpen(community)
        try self.acquireMailQuota(address: "\(community):\(email)", context: context)

        // Anti-enumeration: the answer depends only on whether the username is taken, never on whether the email
        // has an account, and every path does exactly one Argon2 computation (a verification when the username
        // is taken, a hash when it is free), so the timing tells nothing either.
        if let (holderEmail, holderHash) = try await self.accounts.usernameHolder(
            community: community,
            username: username,
            in: self.database
        ) {
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
        let locale = request.locale.isEmpty ? "en" : request.locale
        try await self.database.withTransaction { transaction in
            if try await self.mailExistingAccount(transaction, community: community, email: email) { return }
            // A username taken meanwhile (a concurrent sign-up) gets the same answer as a taken username above.
            try await self.accounts.create(
                .init(
                    id: accountID,
                    communityID: community,
                    email: email,
                    emailVerified: false,
                    username: username,
                    passwordHash: passwordHash,
                    status: .pending,
                    locale: locale
                ),
                in: transaction
            )
            try await self.issueVerification(transaction, accountID: accountID, email: email, locale: locale)
        }
        self.mailRelayNudge()
        var response = Kindred.Auth.V1.SignUpResponse()
        response.resendAfterSeconds = 60
        return response
    }

    private enum VerifyOutcome {
        case verified(String)
        case signUpClosed
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
                guard let token = try await self.emailTokens.lockVerification(hash: hash, in: transaction) else {
                    return .invalid
                }
                // A second click on the link: fine once the address is verified.
                if token.used { return token.emailVerified ? .verified(token.email) : .invalid }
                guard token.live else { return .invalid }
                return try await self.markVerified(
                    transaction,
                    accountID: token.accountID,
                    tokenHash: hash,
                    email: token.email
                )
            }
        case .code(let code)?:
            let community = try Validation.community(code.communityId, field: "code.community_id")
            let email = try Validation.email(code.email, field: "code.email")
            guard code.code.count == 6, code.code.allSatisfy(\.isASCII), code.code.allSatisfy(\.isNumber) else {
                throw AuthError.invalid("code.code", "INVALID_FORMAT", "exactly 6 digits")
            }
            outcome = try await self.database.withTransaction { transaction in
                guard
                    let token = try await self.emailTokens.lockLatestVerificationCode(
                        community: community,
                        email: email,
                        in: transaction
                    )
                else { return .invalid }
                guard token.attempts < 5 else { return .tooManyAttempts }
                let expected = EmailCodeSecret.hash(accountID: token.accountID, code: code.code)
                guard ConstantTime.equals(token.codeHash, expected) else {
                    try await self.emailTokens.countWrongCode(tokenHash: token.tokenHash, in: transaction)
                    return .wrongCode
                }
                return try await self.markVerified(
                    transaction,
                    accountID: token.accountID,
                    tokenHash: token.tokenHash,
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
        case .signUpClosed:
            throw AuthError.signUpClosed
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
        // A pending account becomes a member here: not while its community is closed. It stays pending, with its
        // token unused, and can verify once the community reopens.
        if try await self.communities.isPendingInClosedCommunity(accountID: accountID, in: transaction) {
            return .signUpClosed
        }
        try await self.emailTokens.markUsed(hash: tokenHash, in: transaction)
        try await self.accounts.markEmailVerified(id: accountID, in: transaction)
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
            if let (id, status, locale) = try await self.accounts.lock(
                community: community,
                email: email,
                in: transaction
            ), status == .pending {
                try await self.issueVerification(transaction, accountID: id, email: email, locale: locale)
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
        guard (1...64).contains(request.username.count), request.username.utf8.count <= 256 else {
            throw AuthError.invalid("username", "OUT_OF_RANGE", "1..64 characters")
        }
        try self.acquireAddressQuota("check-username", context: context)
        var response = Kindred.Auth.V1.CheckUsernameResponse()
        response.normalizedUsername = request.username.lowercased()
        guard let username = try? Validation.username(request.username) else {
            response.unavailableReason = "INVALID_FORMAT"
            return response
        }
        let taken = try await self.accounts.isUsernameTaken(community: community, username: username, in: self.database)
        response.available = !taken
        response.unavailableReason = taken ? "TAKEN" : ""
        return response
    }
}
