import Foundation
import KindredGRPC
import KindredIdentity
import KindredOpenSSL
import KindredPostgres
import KindredProto
import Logging

/// `kindred.auth.v1.AuthService`: accounts, credentials, sessions and token signing. Handlers run on the
/// connection's event loop and only await: SQL goes through the libpq pool's threads, Argon2 through
/// `PasswordHasher`'s pool.
public final class AuthService: GRPCService, Sendable {
    let configuration: AuthConfiguration
    let database: PostgresClient
    let hasher: PasswordHasher
    let signingKey: SigningKey
    let signer: AccessTokenSigner
    let authenticator: CallerAuthenticator
    /// Session ends: auth's own set (checked by `authenticator`) and the `WatchRevokedSessions` streams.
    public let revocationFeed: RevocationFeed
    let limiter: RateLimiter
    let commonPasswords: CommonPasswords
    let mail: MailComposer
    let mailRelayNudge: @Sendable () -> Void
    let idTokenVerifier: IDTokenVerifier?
    let logger: Logger
    /// Integrity key of page tokens, derived from the signing key.
    let pageTokenKey: [UInt8]

    public init(
        configuration: AuthConfiguration,
        database: PostgresClient,
        hasher: PasswordHasher,
        signingKey: SigningKey,
        commonPasswords: CommonPasswords,
        limiter: RateLimiter = RateLimiter(),
        idTokenVerifier: IDTokenVerifier? = nil,
        mailRelayNudge: @escaping @Sendable () -> Void = {},
        logger: Logger
    ) {
        self.configuration = configuration
        self.database = database
        self.hasher = hasher
        self.signingKey = signingKey
        self.signer = AccessTokenSigner(keyID: signingKey.keyID, key: signingKey.privateKey)
        let revocations = RevokedSessions(staleAfter: configuration.revocationStaleAfter)
        self.revocationFeed = RevocationFeed(database: database, revocations: revocations, logger: logger)
        self.authenticator = CallerAuthenticator(
            keys: [signingKey.keyID: signingKey.privateKey.publicKey],
            revocations: revocations
        )
        self.limiter = limiter
        self.commonPasswords = commonPasswords
        self.mail = MailComposer(configuration: configuration)
        self.mailRelayNudge = mailRelayNudge
        self.idTokenVerifier = idTokenVerifier
        self.logger = logger
        self.pageTokenKey = SHA256.hash(
            Array(
                ("kindred-auth-page-token:" + ((try? signingKey.privateKey.pemRepresentation) ?? signingKey.keyID)).utf8
            )
        )
    }

    public func register(in router: inout GRPCRouter) {
        typealias M = Kindred.Auth.V1.AuthService.Method
        router.unary(M.signUp) { request, context in
            try await self.handle(context) { try await self.signUp(request, context) }
        }
        router.unary(M.verifyEmail) { request, context in
            try await self.handle(context) { try await self.verifyEmail(request, context) }
        }
        router.unary(M.resendVerification) { request, context in
            try await self.handle(context) { try await self.resendVerification(request, context) }
        }
        router.unary(M.signIn) { request, context in
            try await self.handle(context) { try await self.signIn(request, context) }
        }
        router.unary(M.refresh) { request, context in
            try await self.handle(context) { try await self.refresh(request, context) }
        }
        router.unary(M.signOut) { request, context in
            try await self.handle(context) { try await self.signOut(request, context) }
        }
        router.unary(M.signOutEverywhere) { request, context in
            try await self.handle(context) { try await self.signOutEverywhere(request, context) }
        }
        router.unary(M.listSessions) { request, context in
            try await self.handle(context) { try await self.listSessions(request, context) }
        }
        router.unary(M.revokeSession) { request, context in
            try await self.handle(context) { try await self.revokeSession(request, context) }
        }
        router.unary(M.getPublicKeys) { request, context in
            try await self.handle(context) { try self.getPublicKeys(request) }
        }
        router.unary(M.getAccount) { request, context in
            try await self.handle(context) { try await self.getAccount(request, context) }
        }
        router.unary(M.checkUsername) { request, context in
            try await self.handle(context) { try await self.checkUsername(request, context) }
        }
        router.unary(M.changePassword) { request, context in
            try await self.handle(context) { try await self.changePassword(request, context) }
        }
        router.unary(M.requestPasswordReset) { request, context in
            try await self.handle(context) { try await self.requestPasswordReset(request, context) }
        }
        router.unary(M.resetPassword) { request, context in
            try await self.handle(context) { try await self.resetPassword(request, context) }
        }
        router.unary(M.changeEmail) { request, context in
            try await self.handle(context) { try await self.changeEmail(request, context) }
        }
        router.unary(M.confirmEmailChange) { request, context in
            try await self.handle(context) { try await self.confirmEmailChange(request, context) }
        }
        router.unary(M.changeUsername) { request, context in
            try await self.handle(context) { try await self.changeUsername(request, context) }
        }
        router.unary(M.deleteAccount) { request, context in
            try await self.handle(context) { try await self.deleteAccount(request, context) }
        }
        router.unary(M.deactivateAccount) { request, context in
            try await self.handle(context) { try await self.deactivateAccount(request, context) }
        }
        router.unary(M.reactivateAccount) { request, context in
            try await self.handle(context) { try await self.reactivateAccount(request, context) }
        }
        router.unary(M.signInWithIdToken) { request, context in
            try await self.handle(context) { try await self.signInWithIdToken(request, context) }
        }
        router.unary(M.issueServiceToken) { request, context in
            try await self.handle(context) { try await self.issueServiceToken(request, context) }
        }
        router.unary(M.bootstrapAdmin) { request, context in
            try await self.handle(context) { try await self.bootstrapAdminRPC(request, context) }
        }
        router.unary(M.setAccountRoles) { request, context in
            try await self.handle(context) { try await self.setAccountRoles(request, context) }
        }
        router.unary(M.listAccounts) { request, context in
            try await self.handle(context) { try await self.listAccounts(request, context) }
        }
        router.unary(M.getUserFootprint) { request, context in
            try await self.handle(context) { try await self.getUserFootprint(request, context) }
        }
        router.serverStreaming(M.watchRevokedSessions) { _, writer, context in
            try await self.handle(context) { try await self.watchRevokedSessions(writer, context) }
        }
    }

    /// The one error funnel: domain errors become RPC errors (with ErrorDetail), database and other failures
    /// become UNAVAILABLE/INTERNAL with a fixed message; the detail only goes to the log, without user data.
    private func handle<Response>(_ context: ServerContext, _ body: () async throws -> Response) async throws
        -> Response
    {
        do {
            return try await body()
        } catch let error as AuthError {
            throw error.rpcError
        } catch let error as RPCError {
            throw error
        } catch is CancellationError {
            throw RPCError(.cancelled, "The call was cancelled")
        } catch let error as PostgresError {
            self.logger.error(
                "database failure",
                metadata: [
                    "rpc.method": "\(context.path)", "db.code": "\(error.code)",
                    "db.sqlstate": "\(error.sqlState ?? "-")",
                ]
            )
            let transient: Set<PostgresError.Code> = [
                .poolTimeout, .connectionFailed, .connectionLost, .statementTimeout, .lockTimeout,
            ]
            throw transient.contains(error.code)
                ? AuthError(.unavailable, "The service is busy; try again").rpcError
                : RPCError(.internalError, "The server failed to process the call")
        } catch {
            self.logger.error(
                "unexpected failure",
                metadata: ["rpc.method": "\(context.path)", "error.type": "\(type(of: error))"]
            )
            throw RPCError(.internalError, "The server failed to process the call")
        }
    }

    // MARK: Callers

    /// The client's address: `x-kindred-client-ip` (set by the gateway), else the peer's host.
    func clientAddress(_ context: ServerContext) -> String {
        if let forwarded = context.metadata["x-kindred-client-ip"], !forwarded.isEmpty { return forwarded }
        return context.peerHost
    }

    struct User {
        let userID: String
        let sessionID: String?
        let claims: AccessTokenClaims
        var isAdmin: Bool { self.claims.roles.contains("admin") }
    }

    /// The caller's verified identity: UNAUTHENTICATED for a missing, invalid or expired token or an ended
    /// session; UNAVAILABLE while session ends cannot be checked (the revocation feed is stale).
    func authenticate(_ context: ServerContext) async throws -> CallerIdentity {
        do {
            return try await self.authenticator.authenticate(context)
        } catch where error.code == .unavailable {
            throw AuthError(.unavailable, "The service is busy; try again")
        } catch {
            throw AuthError(.unauthenticated, "A valid access token is required")
        }
    }

    /// The signed-in user of this call: a valid access token whose session is still live.
    func requireUser(_ context: ServerContext) async throws -> User {
        let identity = try await self.authenticate(context)
        guard let userID = identity.userID else { throw AuthError(.permissionDenied, "A user token is required") }
        guard let sessionID = identity.sessionID else {
            throw AuthError(.unauthenticated, "A session token is required")
        }
        let rows = try await self.database.query(
            """
            SELECT 1 FROM sessions s JOIN accounts a ON a.id = s.account_id
            WHERE s.id = \(sessionID) AND s.account_id = \(userID) AND s.revoked_at IS NULL
              AND s.expires_at > now() AND a.status = 'active'
            """
        )
        guard !rows.isEmpty else { throw AuthError(.unauthenticated, "The session has ended") }
        return User(userID: userID, sessionID: sessionID, claims: identity.claims)
    }

    /// The token's identity even when its session has already ended (SignOut is idempotent).
    func optionalCaller(_ context: ServerContext) async -> CallerIdentity? {
        guard let header = context.metadata["authorization"] else { return nil }
        return try? await self.authenticator.authenticate(authorization: header, checkingSession: false)
    }

    /// `WatchRevokedSessions`: service tokens only; the stream ends when the feed loses its database
    /// connection or the server drains.
    func watchRevokedSessions(
        _ writer: ResponseWriter<RevocationFeed.Message>,
        _ context: ServerContext
    ) async throws {
        let identity = try await self.authenticate(context)
        guard identity.isService else { throw AuthError(.permissionDenied, "Service tokens only") }
        let (id, messages) = self.revocationFeed.subscribe()
        defer { self.revocationFeed.unsubscribe(id) }
        for await message in messages {
            try await writer.write(message)
        }
    }

    // MARK: Keys

    func getPublicKeys(_ request: Kindred.Auth.V1.GetPublicKeysRequest) throws -> Kindred.Auth.V1.GetPublicKeysResponse
    {
        var key = Kindred.Auth.V1.PublicKey()
        key.keyId = self.signingKey.keyID
        key.algorithm = AccessTokenPolicy.algorithm
        key.curve = "Ed25519"
        key.publicKey = self.signingKey.privateKey.publicKey.rawRepresentation
        key.status = .signing
        key.notBeforeUnixMs = self.signingKey.createdUnixMilliseconds
        var response = Kindred.Auth.V1.GetPublicKeysResponse()
        response.keys = [key]
        response.cacheMaxAgeSeconds = 300
        return response
    }
}

extension PostgresTimestamp {
    func adding(seconds: Int64) -> PostgresTimestamp {
        PostgresTimestamp(microsecondsSinceEpoch: self.microsecondsSinceEpoch + seconds * 1_000_000)
    }
}
