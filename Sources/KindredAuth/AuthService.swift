import Foundation
import KindredGRPC
import KindredIdentity
import KindredOpenSSL
import KindredPostgres
import KindredProto
import KindredServiceKit
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
    /// Who is calling and what they may do (the kit's one caller check).
    let access: ServiceAccess
    /// Session ends: auth's own set (checked by `authenticator`) and the `WatchRevokedSessions` streams.
    public let revocationFeed: RevocationFeed
    let limiter: AuthLimiter
    let commonPasswords: CommonPasswords
    let mail: MailComposer
    let mailRelayNudge: @Sendable () -> Void
    let idTokenVerifier: IDTokenVerifier?
    /// The OpenID providers' keys fetched from their JWKS URLs (with the key file's); nil: the file's alone.
    let oidcKeys: OIDCKeySource?
    let logger: Logger
    /// Integrity key of page tokens, derived from the signing key.
    let pageTokenKey: [UInt8]
    /// The SQL, one store per aggregate.
    let accounts = AccountStore()
    let sessions = SessionStore()
    let emailTokens = EmailTokenStore()
    let identities = IdentityStore()
    let mailOutbox = MailOutboxStore()
    let communities = CommunityStore()
    /// Events applied from profile (CommunityUpdated), each once.
    let inbox: EventInbox

    public init(
        configuration: AuthConfiguration,
        database: PostgresClient,
        hasher: PasswordHasher,
        signingKey: SigningKey,
        commonPasswords: CommonPasswords,
        limiter: AuthLimiter = AuthLimiter(),
        idTokenVerifier: IDTokenVerifier? = nil,
        oidcKeys: OIDCKeySource? = nil,
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
        self.access = ServiceAccess(authenticator: self.authenticator)
        self.limiter = limiter
        self.commonPasswords = commonPasswords
        self.mail = MailComposer(configuration: configuration)
        self.mailRelayNudge = mailRelayNudge
        self.idTokenVerifier = idTokenVerifier
        self.oidcKeys = oidcKeys
        self.logger = logger
        self.inbox = EventInbox(database: database, logger: logger)
        self.pageTokenKey = SHA256.hash(
            Array(
                ("kindred-auth-page-token:" + ((try? signingKey.privateKey.pemRepresentation) ?? signingKey.keyID)).utf8
            )
        )
    }

    /// Routes call the handlers directly: errors are mapped once, by the runtime (`AuthError` and `PostgresError`
    /// are `RPCErrorConvertible`; see `KindredServiceKit/PostgresErrorMapping.swift`).
    public func register(in router: inout GRPCRouter) {
        typealias M = Kindred.Auth.V1.AuthService.Method
        router.unary(M.signUp) { try await self.signUp($0, $1) }
        router.unary(M.verifyEmail) { try await self.verifyEmail($0, $1) }
        router.unary(M.resendVerification) { try await self.resendVerification($0, $1) }
        router.unary(M.signIn) { try await self.signIn($0, $1) }
        router.unary(M.refresh) { try await self.refresh($0, $1) }
        router.unary(M.signOut) { try await self.signOut($0, $1) }
        router.unary(M.signOutEverywhere) { try await self.signOutEverywhere($0, $1) }
        router.unary(M.listSessions) { try await self.listSessions($0, $1) }
        router.unary(M.revokeSession) { try await self.revokeSession($0, $1) }
        router.unary(M.getPublicKeys) { request, _ in try self.getPublicKeys(request) }
        router.unary(M.getAccount) { try await self.getAccount($0, $1) }
        router.unary(M.checkUsername) { try await self.checkUsername($0, $1) }
        router.unary(M.changePassword) { try await self.changePassword($0, $1) }
        router.unary(M.requestPasswordReset) { try await self.requestPasswordReset($0, $1) }
        router.unary(M.resetPassword) { try await self.resetPassword($0, $1) }
        router.unary(M.changeEmail) { try await self.changeEmail($0, $1) }
        router.unary(M.confirmEmailChange) { try await self.confirmEmailChange($0, $1) }
        router.unary(M.changeUsername) { try await self.changeUsername($0, $1) }
        router.unary(M.deleteAccount) { try await self.deleteAccount($0, $1) }
        router.unary(M.deactivateAccount) { try await self.deactivateAccount($0, $1) }
        router.unary(M.reactivateAccount) { try await self.reactivateAccount($0, $1) }
        router.unary(M.signInWithIdToken) { try await self.signInWithIdToken($0, $1) }
        router.unary(M.issueServiceToken) { try await self.issueServiceToken($0, $1) }
        router.unary(M.bootstrapAdmin) { try await self.bootstrapAdminRPC($0, $1) }
        router.unary(M.setAccountRoles) { try await self.setAccountRoles($0, $1) }
        router.unary(M.listAccounts) { try await self.listAccounts($0, $1) }
        router.unary(M.getUserFootprint) { try await self.getUserFootprint($0, $1) }
        router.unary(M.deliverEvents) { try await self.deliverEvents($0, $1) }
        router.serverStreaming(M.watchRevokedSessions) { _, writer, context in
            try await self.watchRevokedSessions(writer, context)
        }
    }

    // MARK: Callers

    /// The client's address: `x-kindred-client-ip` (set by the gateway), else the peer's host.
    func clientAddress(_ context: ServerContext) -> String {
        if let forwarded = context.metadata["x-kindred-client-ip"], !forwarded.isEmpty { return forwarded }
        return context.peerHost
    }

    /// The signed-in member of this call, whose session auth itself finds live in its tables (auth owns
    /// sessions: it does not wait for its own revocation feed). `admin`: the member must have the admin role.
    func requireLiveUser(_ context: ServerContext, admin: Bool = false) async throws -> SignedInUser {
        let caller = try await self.access.authenticate(context)
        let user = try admin ? ServiceAccess.admin(caller) : ServiceAccess.user(caller)
        guard let sessionID = user.sessionID,
            try await self.sessions.isLive(sessionID: sessionID, accountID: user.id, in: self.database)
        else { throw ServiceAccess.unauthenticated }
        return user
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
        try await self.access.requireService(context)
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
