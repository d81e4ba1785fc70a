import Foundation
import KindredGRPC
import KindredIdentity
import KindredOpenSSL
import KindredPostgres
import KindredProto
import KindredServiceKit

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
            guard try await !self.accounts.adminExists(in: transaction) else {
                throw AuthError(.failedPrecondition, "An admin exists already")
            }
            guard let id = try await self.accounts.findID(community: community, login: login, in: transaction) else {
                throw AuthError(.notFound, "No such account")
            }
            try await self.accounts.setRoles(["admin", "user"], id: id, in: transaction)
            return try await self.accounts.lock(id: id, in: transaction)
        }
        var response = Kindred.Auth.V1.BootstrapAdminResponse()
        response.account = account?.proto(forAdmin: true)
        return response
    }

    func setAccountRoles(
        _ request: Kindred.Auth.V1.SetAccountRolesRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.SetAccountRolesResponse {
        _ = try await self.requireLiveUser(context, admin: true)
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
            guard let account = try await self.accounts.lock(id: target, in: transaction) else {
                throw AuthError(.notFound, "No such account")
            }
            if account.roles.contains("admin") && !roles.contains("admin") {
                guard try await self.accounts.adminExists(except: target, in: transaction) else {
                    throw AuthError(.failedPrecondition, "That would remove the last admin")
                }
            }
            try await self.accounts.setRoles(sorted, id: target, in: transaction)
            return try await self.accounts.lock(id: target, in: transaction) ?? account
        }
        var response = Kindred.Auth.V1.SetAccountRolesResponse()
        response.account = account.proto(forAdmin: true)
        return response
    }

    func listAccounts(
        _ request: Kindred.Auth.V1.ListAccountsRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.ListAccountsResponse {
        let admin = try await self.requireLiveUser(context, admin: true)
        guard (0...100).contains(request.pageSize) else {
            throw AuthError.invalid("page_size", "OUT_OF_RANGE", "0..100")
        }
        guard request.query.count <= 254, request.query.utf8.count <= 1016 else {
            throw AuthError.invalid("query", "TOO_LONG", "at most 254 characters, 1016 bytes")
        }
        let community: String? = request.communityId.isEmpty ? nil : try Validation.community(request.communityId)
        let status: AccountStatus? =
            switch request.status {
            case .pendingVerification: .pending
            case .active: .active
            case .deactivated: .deactivated
            default: nil
            }
        let query = request.query.lowercased()
        let scope = "\(admin.id)|\(community ?? "")|\(status?.rawValue ?? "")|\(query)"
        let pageSize = request.pageSize == 0 ? 20 : Int(request.pageSize)
        let offset = try PageToken.offset(of: request.pageToken, key: self.pageTokenKey, scope: scope)
        let rows = try await self.accounts.list(
            community: community,
            status: status,
            prefix: query,
            limit: pageSize + 1,
            offset: offset,
            in: self.database
        )
        var response = Kindred.Auth.V1.ListAccountsResponse()
        response.accounts = rows.prefix(pageSize).map { $0.proto(forAdmin: true) }
        if rows.count > pageSize {
            response.nextPageToken = PageToken.encode(offset: offset + pageSize, key: self.pageTokenKey, scope: scope)
        }
        return response
    }
}
