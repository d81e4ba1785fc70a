import Foundation
import KindredGRPC
import KindredIdentity
import KindredOpenSSL
import KindredPostgres
import KindredProto

extension AuthService {
    private enum IdTokenOutcome {
        case signedIn(Kindred.Auth.V1.TokenBundle, AccountRecord, created: Bool, linked: Bool)
        case deactivated
        case emailTakenByUnverifiedAccount
    }

    /// Google/Apple sign-in: verifies the ID token (signature with the configured JWKS, issuer, audience,
    /// expiry, nonce = hex SHA-256 of the raw nonce, each nonce once), then signs in the linked account, links
    /// the identity to an account with the same verified email, or creates an account.
    func signInWithIdToken(
        _ request: Kindred.Auth.V1.SignInWithIdTokenRequest,
        _ context: ServerContext
    ) async throws -> Kindred.Auth.V1.SignInWithIdTokenResponse {
        let community = try Validation.community(request.communityId)
        let (provider, issuer, method): (String, String, String)
        switch request.provider {
        case .google: (provider, issuer, method) = ("google", "https://accounts.google.com", "google")
        case .apple: (provider, issuer, method) = ("apple", "https://appleid.apple.com", "apple")
        default: throw AuthError.invalid("provider", "REQUIRED", "GOOGLE or APPLE")
        }
        guard !request.idToken.isEmpty, request.idToken.utf8.count <= 8192 else {
            throw AuthError.invalid(
                "id_token",
                request.idToken.isEmpty ? "REQUIRED" : "TOO_LONG",
                "at most 8192 characters"
            )
        }
        guard (16...128).contains(request.nonce.count) else {
            throw AuthError.invalid("nonce", "OUT_OF_RANGE", "16..128 characters")
        }
        let requestedUsername = request.username.isEmpty ? nil : try Validation.username(request.username)
        try self.acquireAddressQuota("signin", context: context)
        guard let verifier = self.idTokenVerifier else {
            throw AuthError(.failedPrecondition, "Sign-in with ID tokens is not configured")
        }
        let expectedNonce = SHA256.hash(Array(request.nonce.utf8)).map { String(format: "%02x", $0) }.joined()
        let claims: IDTokenClaims
        do {
            claims = try verifier.verify(request.idToken, nonce: expectedNonce)
        } catch {
            throw AuthError(.unauthenticated, "The ID token is invalid")
        }
        guard claims.issuer == issuer else { throw AuthError(.unauthenticated, "The ID token is invalid") }
        let email = claims.emailVerified ? claims.email.flatMap { try? Validation.email($0) } : nil

        let outcome: IdTokenOutcome = try await self.database.withTransaction { transaction in
            try await transaction.execute("DELETE FROM used_nonces WHERE expires_at < now()")
            let fresh = try await transaction.execute(
                """
                INSERT INTO used_nonces (nonce_hash, expires_at)
                VALUES (\(SHA256.hash(Array(request.nonce.utf8))),
                        \(PostgresTimestamp(millisecondsSinceEpoch: max(claims.expiresAt, 0) * 1000 + 3_600_000)))
                ON CONFLICT DO NOTHING
                """
            )
            guard fresh == 1 else { throw AuthError(.unauthenticated, "The ID token is invalid") }

            let linked = try await transaction.query(
                """
                SELECT a.id FROM identities i JOIN accounts a ON a.id = i.account_id
                WHERE i.provider = \(provider) AND i.subject = \(claims.subject) AND a.community_id = \(community)
                """
            )
            if let row = linked.first,
                let account = try await transaction.lockAccount(id: try row.decode(String.self, at: 0))
            {
                guard account.status != "deactivated" else { return .deactivated }
                let tokens = try await self.startSession(
                    transaction,
                    account: account,
                    method: method,
                    client: request.client
                )
                return .signedIn(tokens, account, created: false, linked: false)
            }
            if let email {
                let existing = try await transaction.query(
                    "SELECT id FROM accounts WHERE community_id = \(community) AND email = \(email) FOR UPDATE"
                )
                if let row = existing.first,
                    let account = try await transaction.lockAccount(id: try row.decode(String.self, at: 0))
                {
                    guard account.status != "deactivated" else { return .deactivated }
                    // Linking to an address nobody proved they own would hand the account to the token holder.
                    guard account.emailVerified else { return .emailTakenByUnverifiedAccount }
                    try await transaction.execute(
                        """
                        INSERT INTO identities (provider, subject, account_id, provider_email)
                        VALUES (\(provider), \(claims.subject), \(account.id), \(claims.email ?? ""))
                        """
                    )
                    let tokens = try await self.startSession(
                        transaction,
                        account: account,
                        method: method,
                        client: request.client
                    )
                    return .signedIn(tokens, account, created: false, linked: true)
                }
            }
            let accountID = try UUIDv7.generate()
            let username =
                try requestedUsername
                ?? ("user_" + (try SecureRandom.bytes(count: 6)).map { String(format: "%02x", $0) }.joined())
            do {
                try await transaction.execute(
                    """
                    INSERT INTO accounts (id, community_id, email, email_verified, username, status, locale)
                    VALUES (\(accountID), \(community), \(email), \(email != nil), \(username), 'active',
                            \(request.locale.isEmpty ? "en" : String(request.locale.prefix(35))))
                    """
                )
            } catch let error as PostgresError where error.code == .uniqueViolation {
                throw AuthError(.usernameTaken, "The username is taken")
            }
            try await transaction.execute(
                """
                INSERT INTO identities (provider, subject, account_id, provider_email)
                VALUES (\(provider), \(claims.subject), \(accountID), \(claims.email ?? ""))
                """
            )
            guard let account = try await transaction.lockAccount(id: accountID) else {
                throw AuthError(.unavailable, "Try again")
            }
            let tokens = try await self.startSession(
                transaction,
                account: account,
                method: method,
                client: request.client
            )
            return .signedIn(tokens, account, created: true, linked: false)
        }
        switch outcome {
        case .signedIn(let tokens, let account, let created, let linked):
            var response = Kindred.Auth.V1.SignInWithIdTokenResponse()
            response.tokens = tokens
            response.account = account.proto()
            response.accountCreated = created
            response.identityLinked = linked
            return response
        case .deactivated: throw AuthError(.accountDeactivated, "The account is deactivated")
        case .emailTakenByUnverifiedAccount:
            throw AuthError(.emailTaken, "The address belongs to an unverified account")
        }
    }
}
