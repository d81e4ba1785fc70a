import KindredGRPC
import KindredIdentity
import KindredOpenSSL
import KindredPostgres
import KindredProto
import KindredServiceKit

extension AuthService {
    /// Starts a session (one refresh-token family) and returns its first tokens.
    func startSession(
        _ transaction: PostgresTransaction,
        account: AccountRecord,
        method: SignInMethod,
        client: Kindred.Auth.V1.ClientInfo?
    ) async throws -> Kindred.Auth.V1.TokenBundle {
        let sessionID = try UUIDv7.generate()
        let now = PostgresTimestamp.now
        let sessionEnd = now.adding(seconds: self.configuration.sessionMaxLifetime)
        try await self.sessions.create(
            id: sessionID,
            accountID: account.id,
            method: method,
            deviceName: TextRule.deviceName.truncating(client?.deviceName ?? ""),
            userAgent: TextRule.userAgent.truncating(client?.userAgent ?? ""),
            at: now,
            expiresAt: sessionEnd,
            in: transaction
        )
        try await self.accounts.recordSignIn(id: account.id, at: now, in: transaction)
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
        try await self.sessions.addRefreshToken(
            hash: refreshHash,
            sessionID: sessionID,
            issuedAt: now,
            expiresAt: refreshExpires,
            in: transaction
        )
        let issuedAt = now.millisecondsSinceEpoch / 1000
        let claims = AccessTokenClaims(
            subject: account.id,
            issuedAt: issuedAt,
            // Never past the session's absolute end.
            lifetimeSeconds: max(
                1,
                min(self.configuration.accessTokenLifetime, sessionEnd.millisecondsSinceEpoch / 1000 - issuedAt)
            ),
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
        guard (3...254).contains(login.count), login.utf8.count <= 254 else {
            throw AuthError.invalid("login", "INVALID_FORMAT", "3..254 characters")
        }
        try Validation.presentedPassword(request.password, field: "password")
        try self.acquireAddressQuota("signin", context: context)

        let account = try await self.accounts.find(community: community, login: login, in: self.database)
        // Unknown logins are throttled under their own name, so both cases behave alike; per client address, so a
        // stranger guessing from theirs does not hold the owner signing in from another.
        let subject = account.map { "acct:" + $0.id } ?? "login:\(community):\(login)"
        let address = self.clientAddress(context)
        if let wait = self.limiter.signIns.delay(
            subject: subject,
            address: address,
            free: self.configuration.signInFreeFailures,
            perHour: self.configuration.signInFailuresPerHour
        ) {
            throw AuthError.rateLimited(retryAfter: wait)
        }
        guard try await self.hasher.verify(request.password, encoded: account?.passwordHash), let account else {
            self.limiter.signIns.recordFailure(subject: subject, address: address)
            throw AuthError(.invalidCredentials, "The login or password is wrong")
        }
        self.limiter.signIns.recordSuccess(subject: subject, address: address)
        switch account.status {
        case .pending: throw AuthError(.emailNotVerified, "Confirm your email address first")
        case .deactivated: throw AuthError(.accountDeactivated, "The account is deactivated")
        case .active: break
        }
        let rehash =
            account.passwordHash.map(self.hasher.needsRehash) == true
            ? try await self.hasher.hash(request.password) : nil
        let bundle = try await self.database.withTransaction { transaction in
            if let rehash {
                try await self.accounts.rehashPassword(
                    id: account.id,
                    from: account.passwordHash,
                    to: rehash,
                    in: transaction
                )
            }
            return try await self.startSession(
                transaction,
                account: account,
                method: .password,
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
            guard let token = try await self.sessions.lockRefreshToken(hash: hash, in: transaction) else {
                return .invalid
            }
            if token.spent {
                // A spent token again: either it was stolen or the client is confused; end the family.
                try await self.sessions.end(sessionID: token.sessionID, reason: .refreshTokenReused, in: transaction)
                return .reused
            }
            guard token.live, let account = try await self.accounts.lock(id: token.accountID, in: transaction) else {
                return .invalid
            }
            guard account.status == .active else { return .deactivated }
            try await self.sessions.spendRefreshToken(hash: hash, sessionID: token.sessionID, in: transaction)
            return .rotated(
                try await self.issueTokens(
                    transaction,
                    account: account,
                    sessionID: token.sessionID,
                    authTime: token.sessionStart,
                    sessionEnd: token.sessionEnd
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
            try await self.sessions.end(sessionID: sessionID, accountID: userID, reason: .signOut, in: self.database)
            return .init()
        }
        guard !request.refreshToken.isEmpty, OpaqueToken.isPlausible(request.refreshToken) else {
            throw AuthError(.unauthenticated, "A valid access token or refresh token is required")
        }
        let hash = OpaqueToken.hash(request.refreshToken)
        guard try await self.sessions.end(refreshTokenHash: hash, reason: .signOut, in: self.database) else {
            throw AuthError(.unauthenticated, "A valid access token or refresh token is required")
        }
        return .init()
    }

    func signOutEverywhere(
        _ request: Kindred.Auth.V1.SignOutEverywhereRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.SignOutEverywhereResponse {
        let user = try await self.requireLiveUser(context)
        let ended = try await self.database.withTransaction { transaction in
            try await self.sessions.endAll(
                accountID: user.id,
                except: request.keepCurrent ? user.sessionID : nil,
                reason: .signOutEverywhere,
                in: transaction
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
        let user = try await self.requireLiveUser(context)
        guard (0...100).contains(request.pageSize) else {
            throw AuthError.invalid("page_size", "OUT_OF_RANGE", "0..100")
        }
        let pageSize = request.pageSize == 0 ? 20 : Int(request.pageSize)
        let offset = try PageToken.offset(of: request.pageToken, key: self.pageTokenKey, scope: user.id)
        let rows = try await self.sessions.listLive(
            accountID: user.id,
            limit: pageSize + 1,
            offset: offset,
            in: self.database
        )
        var response = Kindred.Auth.V1.ListSessionsResponse()
        for record in rows.prefix(pageSize) {
            var session = Kindred.Auth.V1.Session()
            session.sessionId = record.id
            session.signInMethod =
                switch record.method {
                case .google: .google
                case .apple: .apple
                case .password, nil: .password
                }
            session.deviceName = record.deviceName
            session.userAgent = record.userAgent
            session.current = record.id == user.sessionID
            session.createdUnixMs = record.createdAt.millisecondsSinceEpoch
            session.lastUsedUnixMs = record.lastUsedAt.millisecondsSinceEpoch
            session.expiresUnixMs = record.expiresAt.millisecondsSinceEpoch
            response.sessions.append(session)
        }
        if rows.count > pageSize {
            response.nextPageToken = PageToken.encode(
                offset: offset + pageSize,
                key: self.pageTokenKey,
                scope: user.id
            )
        }
        return response
    }

    func revokeSession(
        _ request: Kindred.Auth.V1.RevokeSessionRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.RevokeSessionResponse {
        let user = try await self.requireLiveUser(context)
        guard UUIDv7.isValid(request.sessionID) else {
            throw AuthError.invalid("session_id", "INVALID_FORMAT", "a session id")
        }
        let found = try await self.sessions.endIfOwned(
            sessionID: request.sessionID.lowercased(),
            accountID: user.id,
            reason: .revoked,
            in: self.database
        )
        guard found else { throw AuthError(.notFound, "No such session") }
        return .init()
    }

    func getAccount(_ request: Kindred.Auth.V1.GetAccountRequest, _ context: ServerContext) async throws
        -> Kindred.Auth.V1.GetAccountResponse
    {
        let identity = try await self.access.authenticate(context)
        let target = request.userID.isEmpty ? (identity.userID ?? "") : request.userID.lowercased()
        guard UUIDv7.isValid(target) else { throw AuthError.invalid("user_id", "INVALID_FORMAT", "a user id") }
        let privileged = identity.isAdmin || identity.isService
        guard target == identity.userID || privileged else {
            throw AuthError(.permissionDenied, "Not allowed for this caller")
        }
        guard let account = try await self.accounts.find(id: target, in: self.database) else {
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
