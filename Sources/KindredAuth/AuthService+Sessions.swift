import KindredGRPC
import KindredIdentity
import KindredOpenSSL
import KindredPostgres
import KindredProto

extension AuthService {
    /// Starts a session (one refresh-token family) and returns its first tokens.
    func startSession(
        _ transaction: PostgresTransaction,
        account: AccountRecord,
        method: String,
        client: Kindred.Auth.V1.ClientInfo?
    ) async throws -> Kindred.Auth.V1.TokenBundle {
        let sessionID = try UUIDv7.generate()
        let now = PostgresTimestamp.now
        let sessionEnd = now.adding(seconds: self.configuration.sessionMaxLifetime)
        try await transaction.execute(
            """
            INSERT INTO sessions (id, account_id, method, device_name, user_agent, created_at, last_used_at, expires_at)
            VALUES (\(sessionID), \(account.id), \(method), \(Validation.truncated(client?.deviceName ?? "", to: 64)),
                    \(Validation.truncated(client?.userAgent ?? "", to: 256)), \(now), \(now), \(sessionEnd))
            """
        )
        try await transaction.execute("UPDATE accounts SET last_sign_in_at = \(now) WHERE id = \(account.id)")
        return try await self.issueTokens(
            transaction,
            account: account,
            sessionID: sessionID,
            authTime: now,
            sessionEnd: sessionEnd
        )
    }

    /// A new refresh token for the session plus a signed access token.
    func issueTokens(
        _ transaction: PostgresTransaction,
        account: AccountRecord,
        sessionID: String,
        authTime: PostgresTimestamp,
        sessionEnd: PostgresTimestamp
    ) async throws -> Kindred.Auth.V1.TokenBundle {
        let now = PostgresTimestamp.now
        let (refreshToken, refreshHash) = try OpaqueToken.generate()
        let refreshExpires = min(now.adding(seconds: self.configuration.refreshTokenLifetime), sessionEnd)
        try await transaction.execute(
            """
            INSERT INTO refresh_tokens (token_hash, session_id, issued_at, expires_at)
            VALUES (\(refreshHash), \(sessionID), \(now), \(refreshExpires))
            """
        )
        let issuedAt = now.millisecondsSinceEpoch / 1000
        let claims = AccessTokenClaims(
            subject: account.id,
            issuedAt: issuedAt,
            // Never past the session's absolute end.
            lifetimeSeconds: max(1, min(self.configuration.accessTokenLifetime, sessionEnd.millisecondsSinceEpoch / 1000 - issuedAt)),
            tokenID: try UUIDv7.generate(),
            sessionID: sessionID,
            communityID: account.communityID,
            roles: account.roles,
            authTime: authTime.millisecondsSinceEpoch / 1000
        )
        var bundle = Kindred.Auth.V1.TokenBundle()
        bundle.accessToken = try self.signer.sign(claims)
        bundle.accessTokenExpiresUnixMs = claims.exp * 1000
        bundle.refreshToken = refreshToken
        bundle.refreshTokenExpiresUnixMs = refreshExpires.millisecondsSinceEpoch
        bundle.sessionId = sessionID
        bundle.tokenType = "Bearer"
        return bundle
    }

    func signIn(_ request: Kindred.Auth.V1.SignInRequest, _ context: ServerContext) async throws
        -> Kindred.Auth.V1.SignInResponse
    {
        let community = try Validation.community(request.communityId)
        let login = request.login.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        guard (3...254).contains(login.count) else {
            throw AuthError.invalid("login", "INVALID_FORMAT", "3..254 characters")
        }
        try Validation.presentedPassword(request.password, field: "password")
        try self.acquireAddressQuota("signin", context: context)

        let rows = try await self.database.query(
            """
            SELECT \(unescaped: AccountRecord.columns) FROM accounts
            WHERE community_id = \(community) AND (email = \(login) OR username = \(login))
            ORDER BY (email = \(login)) DESC LIMIT 1
            """
        )
        let account = try rows.first.map(AccountRecord.init)
        // Unknown logins are throttled under their own name, so both cases behave alike.
        let throttleKey = account.map { "acct:" + $0.id } ?? "login:\(community):\(login)"
        if let wait = self.limiter.signInDelay(
            throttleKey,
            free: self.configuration.signInFreeFailures,
            perHour: self.configuration.signInFailuresPerHour
        ) {
            throw AuthError.rateLimited(retryAfter: wait)
        }
        guard try await self.hasher.verify(request.password, encoded: account?.passwordHash), let account else {
            self.limiter.recordSignInFailure(throttleKey)
            throw AuthError(.invalidCredentials, "The login or password is wrong")
        }
        self.limiter.resetSignInFailures(throttleKey)
        switch account.status {
        case "pending": throw AuthError(.emailNotVerified, "Confirm your email address first")
        case "deactivated": throw AuthError(.accountDeactivated, "The account is deactivated")
        default: break
        }
        let rehash =
            account.passwordHash.map(self.hasher.needsRehash) == true
            ? try await self.hasher.hash(request.password) : nil
        let bundle = try await self.database.withTransaction { transaction in
            if let rehash {
                try await transaction.execute(
                    "UPDATE accounts SET password_hash = \(rehash) WHERE id = \(account.id) AND password_hash = \(account.passwordHash)"
                )
            }
            return try await self.startSession(
                transaction,
                account: account,
                method: "password",
                client: request.client
            )
        }
        var response = Kindred.Auth.V1.SignInResponse()
        response.tokens = bundle
        response.account = account.proto()
        return response
    }

    private enum RefreshOutcome {
        case rotated(Kindred.Auth.V1.TokenBundle)
        case invalid
        case reused
        case deactivated
    }

    func refresh(_ request: Kindred.Auth.V1.RefreshRequest, _ context: ServerContext) async throws
        -> Kindred.Auth.V1.RefreshResponse
    {
        let token = try Validation.token(request.refreshToken, field: "refresh_token")
        try self.acquireAddressQuota("refresh", context: context)
        let hash = OpaqueToken.hash(token)
        let outcome: RefreshOutcome = try await self.database.withTransaction { transaction in
            // Locking the session row serialises concurrent refreshes of one family.
            let rows = try await transaction.query(
                """
                SELECT r.session_id, r.spent_at IS NOT NULL, r.expires_at > now(), s.revoked_at IS NULL,
                       s.expires_at > now(), s.created_at, s.expires_at, s.account_id
                FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id
                WHERE r.token_hash = \(hash) FOR UPDATE OF r, s
                """
            )
            guard let row = rows.first else { return .invalid }
            let (sessionID, spent, tokenLive, notRevoked, notExpired, sessionStart, sessionEnd, accountID) =
                try row.decode(
                    (String, Bool, Bool, Bool, Bool, PostgresTimestamp, PostgresTimestamp, String).self
                )
            if spent {
                // A spent token again: either it was stolen or the client is confused; end the family.
                try await transaction.execute(
                    """
                    UPDATE sessions SET revoked_at = now(), revoke_reason = 'refresh_token_reused'
                    WHERE id = \(sessionID) AND revoked_at IS NULL
                    """
                )
                return .reused
            }
            guard tokenLive, notRevoked, notExpired, let account = try await transaction.lockAccount(id: accountID)
            else {
                return .invalid
            }
            guard account.status == "active" else { return .deactivated }
            try await transaction.execute("UPDATE refresh_tokens SET spent_at = now() WHERE token_hash = \(hash)")
            try await transaction.execute("UPDATE sessions SET last_used_at = now() WHERE id = \(sessionID)")
            return .rotated(
                try await self.issueTokens(
                    transaction,
                    account: account,
                    sessionID: sessionID,
                    authTime: sessionStart,
                    sessionEnd: sessionEnd
                )
            )
        }
        switch outcome {
        case .rotated(let bundle):
            var response = Kindred.Auth.V1.RefreshResponse()
            response.tokens = bundle
            return response
        case .invalid: throw AuthError(.unauthenticated, "The refresh token is invalid, expired or revoked")
        case .reused: throw AuthError(.tokenReused, "The refresh token was already used; the session has ended")
        case .deactivated: throw AuthError(.accountDeactivated, "The account is deactivated")
        }
    }

    func signOut(_ request: Kindred.Auth.V1.SignOutRequest, _ context: ServerContext) async throws
        -> Kindred.Auth.V1.SignOutResponse
    {
        if context.metadata["authorization"] != nil, let caller = await self.optionalCaller(context),
            let userID = caller.userID, let sessionID = caller.sessionID
        {
            try await self.database.execute(
                """
                UPDATE sessions SET revoked_at = now(), revoke_reason = 'sign_out'
                WHERE id = \(sessionID) AND account_id = \(userID) AND revoked_at IS NULL
                """
            )
            return .init()
        }
        guard !request.refreshToken.isEmpty, OpaqueToken.isPlausible(request.refreshToken) else {
            throw AuthError(.unauthenticated, "A valid access token or refresh token is required")
        }
        let rows = try await self.database.query(
            """
            UPDATE sessions SET revoked_at = COALESCE(revoked_at, now()), revoke_reason = COALESCE(revoke_reason, 'sign_out')
            WHERE id = (SELECT session_id FROM refresh_tokens WHERE token_hash = \(OpaqueToken.hash(request.refreshToken)))
            RETURNING id
            """
        )
        guard !rows.isEmpty else {
            throw AuthError(.unauthenticated, "A valid access token or refresh token is required")
        }
        return .init()
    }

    func signOutEverywhere(
        _ request: Kindred.Auth.V1.SignOutEverywhereRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.SignOutEverywhereResponse {
        let user = try await self.requireUser(context)
        let ended = try await self.database.withTransaction { transaction in
            try await transaction.revokeSessions(
                accountID: user.userID,
                except: request.keepCurrent ? user.sessionID : nil,
                reason: "sign_out_everywhere"
            )
        }
        var response = Kindred.Auth.V1.SignOutEverywhereResponse()
        response.endedSessions = Int32(ended)
        return response
    }

    func listSessions(
        _ request: Kindred.Auth.V1.ListSessionsRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.ListSessionsResponse {
        let user = try await self.requireUser(context)
        guard (0...100).contains(request.pageSize) else {
            throw AuthError.invalid("page_size", "OUT_OF_RANGE", "0..100")
        }
        let pageSize = request.pageSize == 0 ? 20 : Int(request.pageSize)
        var offset = 0
        if !request.pageToken.isEmpty {
            guard let decoded = PageToken.decode(request.pageToken, key: self.pageTokenKey, scope: user.userID) else {
                var error = AuthError.invalid("page_token", "PAGE_TOKEN_INVALID", "use a token from a previous page")
                error.violations[0].reason = "PAGE_TOKEN_INVALID"
                throw error
            }
            offset = decoded
        }
        let rows = try await self.database.query(
            """
            SELECT id, method, device_name, user_agent, created_at, last_used_at, expires_at FROM sessions
            WHERE account_id = \(user.userID) AND revoked_at IS NULL AND expires_at > now()
            ORDER BY last_used_at DESC, id LIMIT \(Int64(pageSize + 1)) OFFSET \(Int64(offset))
            """
        )
        var response = Kindred.Auth.V1.ListSessionsResponse()
        for row in rows.prefix(pageSize) {
            let (id, method, device, agent, created, used, expires) = try row.decode(
                (String, String, String, String, PostgresTimestamp, PostgresTimestamp, PostgresTimestamp).self
            )
            var session = Kindred.Auth.V1.Session()
            session.sessionId = id
            session.signInMethod = method == "google" ? .google : method == "apple" ? .apple : .password
            session.deviceName = device
            session.userAgent = agent
            session.current = id == user.sessionID
            session.createdUnixMs = created.millisecondsSinceEpoch
            session.lastUsedUnixMs = used.millisecondsSinceEpoch
            session.expiresUnixMs = expires.millisecondsSinceEpoch
            response.sessions.append(session)
        }
        if rows.count > pageSize {
            response.nextPageToken = PageToken.encode(
                offset: offset + pageSize,
                key: self.pageTokenKey,
                scope: user.userID
            )
        }
        return response
    }

    func revokeSession(
        _ request: Kindred.Auth.V1.RevokeSessionRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.RevokeSessionResponse {
        let user = try await self.requireUser(context)
        guard UUIDv7.isValid(request.sessionID) else {
            throw AuthError.invalid("session_id", "INVALID_FORMAT", "a session id")
        }
        let rows = try await self.database.query(
            """
            UPDATE sessions SET revoked_at = COALESCE(revoked_at, now()), revoke_reason = COALESCE(revoke_reason, 'revoked')
            WHERE id = \(request.sessionID.lowercased()) AND account_id = \(user.userID) RETURNING id
            """
        )
        guard !rows.isEmpty else { throw AuthError(.notFound, "No such session") }
        return .init()
    }

    func getAccount(_ request: Kindred.Auth.V1.GetAccountRequest, _ context: ServerContext) async throws
        -> Kindred.Auth.V1.GetAccountResponse
    {
        let identity = try await self.authenticate(context)
        let target = request.userID.isEmpty ? (identity.userID ?? "") : request.userID.lowercased()
        guard UUIDv7.isValid(target) else { throw AuthError.invalid("user_id", "INVALID_FORMAT", "a user id") }
        let privileged = identity.isAdmin || identity.isService
        guard target == identity.userID || privileged else {
            throw AuthError(.permissionDenied, "Not allowed for this caller")
        }
        guard let account = try await self.database.account(id: target) else {
            throw AuthError(.notFound, "No such account")
        }
        var response = Kindred.Auth.V1.GetAccountResponse()
        response.account = account.proto(forAdmin: identity.isAdmin)
        return response
    }
}

extension Kindred.Auth.V1.RevokeSessionRequest {
    var sessionID: String { self.sessionId }
}

extension Kindred.Auth.V1.GetAccountRequest {
    var userID: String { self.userId }
}
