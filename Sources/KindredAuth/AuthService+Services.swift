import Foundation
import KindredGRPC
import KindredIdentity
import KindredOpenSSL
import KindredPostgres
import KindredProto

extension AuthService {
    /// A short-lived token for a Kindred service, against its configured secret (constant-time comparison).
    func issueServiceToken(
        _ request: Kindred.Auth.V1.IssueServiceTokenRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.IssueServiceTokenResponse {
        try self.acquireAddressQuota("service-token", context: context)
        let expected = self.configuration.serviceSecrets[request.serviceName]
        // Compared even for unknown names, so the answer takes the same time.
        let matches = ConstantTime.equals(
            SHA256.hash(Array(request.clientSecret.utf8)),
            SHA256.hash(Array((expected ?? "\u{0}unset").utf8))
        )
        guard let _ = expected, matches else { throw AuthError(.unauthenticated, "Unknown service or wrong secret") }
        let (token, expires) = try self.signServiceToken(for: request.serviceName)
        var response = Kindred.Auth.V1.IssueServiceTokenResponse()
        response.accessToken = token
        response.expiresUnixMs = expires
        return response
    }

    /// A service token for `service` and its expiry (UTC ms). Auth's own calls (the events relay) use it
    /// with `service` "auth", without a secret: auth holds the signing key.
    func signServiceToken(for service: String) throws -> (token: String, expiresUnixMs: Int64) {
        let claims = AccessTokenClaims(
            subject: "service:" + service,
            issuedAt: Int64(Date().timeIntervalSince1970),
            lifetimeSeconds: self.configuration.accessTokenLifetime,
            tokenID: try UUIDv7.generate(),
            sessionID: nil,
            roles: ["service"]
        )
        return (try self.signer.sign(claims), claims.exp * 1000)
    }

    /// Grants ROLE_ADMIN while no admin exists, to whoever knows KINDRED_AUTH_BOOTSTRAP_SECRET.
    func bootstrapAdminRPC(
        _ request: Kindred.Auth.V1.BootstrapAdminRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.BootstrapAdminResponse {
        try self.acquireAddressQuota("bootstrap", context: context)
        guard let secret = self.configuration.bootstrapSecret,
            ConstantTime.equals(SHA256.hash(Array(request.bootstrapSecret.utf8)), SHA256.hash(Array(secret.utf8)))
        else { throw AuthError(.permissionDenied, "Wrong or unconfigured bootstrap secret") }
        let community = try Validation.community(request.communityId)
        let login = request.login.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        let account = try await self.database.withTransaction(isolation: .serializable) { transaction in
            let admins = try await transaction.query("SELECT 1 FROM accounts WHERE 'admin' = ANY(roles) LIMIT 1")
            guard admins.isEmpty else { throw AuthError(.failedPrecondition, "An admin exists already") }
            let rows = try await transaction.query(
                "SELECT id FROM accounts WHERE community_id = \(community) AND (email = \(login) OR username = \(login)) LIMIT 1"
            )
            guard let row = rows.first else { throw AuthError(.notFound, "No such account") }
            let id = try row.decode(String.self, at: 0)
            try await transaction.execute("UPDATE accounts SET roles = ARRAY['admin', 'user'] WHERE id = \(id)")
            return try await transaction.lockAccount(id: id)
        }
        var response = Kindred.Auth.V1.BootstrapAdminResponse()
        response.account = account?.proto(forAdmin: true)
        return response
    }

    func setAccountRoles(
        _ request: Kindred.Auth.V1.SetAccountRolesRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.SetAccountRolesResponse {
        _ = try await self.requireAdmin(context)
        let target = request.userId.lowercased()
        guard UUIDv7.isValid(target) else { throw AuthError.invalid("user_id", "INVALID_FORMAT", "a user id") }
        var roles: Set<String> = ["user"]
        for (index, role) in request.roles.enumerated() {
            switch role {
            case .user: break
            case .admin: roles.insert("admin")
            default: throw AuthError.invalid("roles[\(index)]", "NOT_ALLOWED", "USER or ADMIN")
            }
        }
        let sorted = roles.sorted()
        let account = try await self.database.withTransaction(isolation: .serializable) { transaction in
            guard let account = try await transaction.lockAccount(id: target) else {
                throw AuthError(.notFound, "No such account")
            }
            if account.roles.contains("admin") && !roles.contains("admin") {
                let others = try await transaction.query(
                    "SELECT 1 FROM accounts WHERE 'admin' = ANY(roles) AND id <> \(target) LIMIT 1"
                )
                guard !others.isEmpty else { throw AuthError(.failedPrecondition, "That would remove the last admin") }
            }
            try await transaction.execute("UPDATE accounts SET roles = \(sorted) WHERE id = \(target)")
            return try await transaction.lockAccount(id: target) ?? account
        }
        var response = Kindred.Auth.V1.SetAccountRolesResponse()
        response.account = account.proto(forAdmin: true)
        return response
    }

    func listAccounts(
        _ request: Kindred.Auth.V1.ListAccountsRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.ListAccountsResponse {
        let admin = try await self.requireAdmin(context)
        guard (0...100).contains(request.pageSize) else {
            throw AuthError.invalid("page_size", "OUT_OF_RANGE", "0..100")
        }
        guard request.query.count <= 254 else { throw AuthError.invalid("query", "TOO_LONG", "at most 254 characters") }
        let community: String? = request.communityId.isEmpty ? nil : try Validation.community(request.communityId)
        let status: String? =
            switch request.status {
            case .pendingVerification: "pending"
            case .active: "active"
            case .deactivated: "deactivated"
            default: nil
            }
        let query = request.query.lowercased()
        let scope = "\(admin.userID)|\(community ?? "")|\(status ?? "")|\(query)"
        let pageSize = request.pageSize == 0 ? 20 : Int(request.pageSize)
        var offset = 0
        if !request.pageToken.isEmpty {
            guard let decoded = PageToken.decode(request.pageToken, key: self.pageTokenKey, scope: scope) else {
                throw AuthError.invalid("page_token", "PAGE_TOKEN_INVALID", "use a token from a previous page")
            }
            offset = decoded
        }
        // Prefix match: escape LIKE's wildcards in the user's text.
        let pattern =
            query.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
            .replacingOccurrences(of: "_", with: "\\_") + "%"
        let rows = try await self.database.query(
            """
            SELECT \(unescaped: AccountRecord.columns) FROM accounts
            WHERE (\(community)::text IS NULL OR community_id = \(community))
              AND (\(status)::text IS NULL OR status = \(status))
              AND (email LIKE \(pattern) OR username LIKE \(pattern))
            ORDER BY created_at DESC, id DESC LIMIT \(Int64(pageSize + 1)) OFFSET \(Int64(offset))
            """
        )
        var response = Kindred.Auth.V1.ListAccountsResponse()
        response.accounts = try rows.prefix(pageSize).map { try AccountRecord($0).proto(forAdmin: true) }
        if rows.count > pageSize {
            response.nextPageToken = PageToken.encode(offset: offset + pageSize, key: self.pageTokenKey, scope: scope)
        }
        return response
    }
}
