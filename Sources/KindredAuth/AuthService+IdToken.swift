import Foundation
import KindredGRPC
import KindredIdentity
import KindredOpenSSL
import KindredPostgres
import KindredProto
import KindredServiceKit

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
        let (provider, issuer): (SignInMethod, String)
        switch request.provider {
        case .google: (provider, issuer) = (.google, "https://accounts.google.com")
        case .apple: (provider, issuer) = (.apple, "https://appleid.apple.com")
        default: throw AuthError.invalid("provider", "REQUIRED", "GOOGLE or APPLE")
        }
        guard !request.idToken.isEmpty, request.idToken.utf8.count <= 8192 else {
            throw AuthError.invalid(
                "id_token",
                request.idToken.isEmpty ? "REQUIRED" : "TOO_LONG",
                "at most 8192 characters"
            )
        }
        guard (16...128).contains(request.nonce.count), request.nonce.utf8.count <= 512 else {
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
            if let keys = self.oidcKeys {
                claims = try await keys.verify(request.idToken, with: verifier, nonce: expectedNonce)
            } else {
                claims = try verifier.verify(request.idToken, nonce: expectedNonce)
            }
        } catch {
            throw AuthError(.unauthenticated, "The ID token is invalid")
        }
        guard claims.issuer == issuer else { throw AuthError(.unauthenticated, "The ID token is invalid") }
        let email = claims.emailVerified ? claims.email.flatMap { try? Validation.email($0) } : nil

        let outcome: IdTokenOutcome = try await self.database.withTransaction { transaction in
            let fresh = try await self.identities.claimNonce(
                request.nonce,
                expiresAt: PostgresTimestamp(millisecondsSinceEpoch: max(claims.expiresAt, 0) * 1000 + 3_600_000),
                in: transaction
            )
            guard fresh else { throw AuthError(.unauthenticated, "The ID token is invalid") }

            if let linkedID = try await self.identities.linkedAccount(
                provider: provider,
                subject: claims.subject,
                community: community,
                in: transaction
            ), let account = try await self.accounts.lock(id: linkedID, in: transaction) {
                guard account.status != .deactivated else { return .deactivated }
                let tokens = try await self.startSession(
                    transaction,
                    account: account,
                    method: provider,
                    client: request.client
                )
                return .signedIn(tokens, account, created: false, linked: false)
            }
            if let email {
                if let (id, _, _) = try await self.accounts.lock(community: community, email: email, in: transaction),
                    let account = try await self.accounts.lock(id: id, in: transaction)
                {
                    guard account.status != .deactivated else { return .deactivated }
                    // Linking to an address nobody proved they own would hand the account to the token holder.
                    guard account.emailVerified else { return .emailTakenByUnverifiedAccount }
                    try await self.identities.link(
                        provider: provider,
                        subject: claims.subject,
                        accountID: account.id,
                        providerEmail: claims.email ?? "",
                        in: transaction
                    )
                    let tokens = try await self.startSession(
                        transaction,
                        account: account,
                        method: provider,
                        client: request.client
                    )
                    return .signedIn(tokens, account, created: false, linked: true)
                }
            }
            // A first sign-in creates an account: a new member, refused while the community is closed.
            guard try await self.communities.isOpen(community, in: transaction) else { throw AuthError.signUpClosed }
            let accountID = try UUIDv7.generate()
            let username =
                try requestedUsername
                ?? ("user_" + (try SecureRandom.bytes(count: 6)).map { String(format: "%02x", $0) }.joined())
            try await self.accounts.create(
                .init(
                    id: accountID,
                    communityID: community,
                    email: email,
                    emailVerified: email != nil,
                    username: username,
                    passwordHash: nil,
                    status: .active,
                    locale: request.locale.isEmpty ? "en" : TextRule.locale.truncating(request.locale)
                ),
                in: transaction
            )
            try await self.identities.link(
                provider: provider,
                subject: claims.subject,
                accountID: accountID,
                providerEmail: claims.email ?? "",
                in: transaction
            )
            guard let account = try await self.accounts.lock(id: accountID, in: transaction) else {
                throw AuthError(.unavailable, "Try again")
            }
            let tokens = try await self.startSession(
                transaction,
                account: account,
                method: provider,
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
