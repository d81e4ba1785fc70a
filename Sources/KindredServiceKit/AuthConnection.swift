import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredOpenSSL
import KindredProto
import Logging

/// What a service (not auth itself) needs from auth to check its callers on its own, as the gateway does:
/// auth's public keys (fetched at start, refetched for an unknown key id), the set of ended sessions fed by
/// auth's WatchRevokedSessions, and the service's own token (IssueServiceToken with
/// `KINDRED_AUTH_SERVICE_SECRET_<NAME>`) for that stream, for DeliverEvents relays and for calls to others.
///
/// ```swift
/// let auth = AuthConnection(client: authClient, serviceName: "match", secret: secret, logger: logger)
/// runner.background += auth.backgroundTasks        // key warm-up + revocation watcher
/// let caller = try await auth.authenticator.authenticate(context)
/// ```
///
/// Without a secret no session ends can be followed: calls with a user token answer UNAVAILABLE (fail closed),
/// exactly as in the gateway. Tests pass fixed keys with ``init(fixedKeys:)``.
public final class AuthConnection: Sendable {
    public let authenticator: CallerAuthenticator
    public let access: ServiceAccess
    /// The service's own token (nil without a secret).
    public let serviceTokens: ServiceTokenSource?
    /// Auth's client (nil with fixed keys).
    public let client: GRPCClient?
    private let revocations: RevokedSessions?
    private let watcher: RevocationWatcher?
    private let serviceName: String?
    private let logger: Logger

    public init(
        client: GRPCClient,
        serviceName: String,
        secret: String?,
        revocationStaleAfter: Duration = .seconds(5),
        logger: Logger
    ) {
        self.client = client
        self.serviceName = serviceName
        self.logger = logger
        let revocations = RevokedSessions(staleAfter: revocationStaleAfter)
        self.revocations = revocations
        if let secret {
            let tokens = ServiceTokenSource(auth: client, serviceName: serviceName, secret: secret)
            self.serviceTokens = tokens
            self.watcher = RevocationWatcher(client: client, revocations: revocations, logger: logger) {
                try await tokens.token()
            }
        } else {
            self.serviceTokens = nil
            self.watcher = nil
            logger.error(
                "service secret is not set: session ends cannot be followed, calls with a user token answer UNAVAILABLE",
                metadata: ["service": "\(serviceName)"])
        }
        self.authenticator = CallerAuthenticator(refetchInterval: .seconds(5), revocations: revocations) {
            let response = try await client.unary(
                Kindred.Auth.V1.AuthService.Method.getPublicKeys,
                Kindred.Auth.V1.GetPublicKeysRequest(),
                options: CallOptions(timeout: .seconds(3))
            )
            var keys: [String: Ed25519PublicKey] = [:]
            for key in response.keys where key.curve == "Ed25519" && key.status != .retired {
                keys[key.keyId] = try Ed25519PublicKey(rawRepresentation: key.publicKey)
            }
            return keys
        }
        self.access = ServiceAccess(authenticator: self.authenticator)
    }

    /// Connects to auth at `address` (h2c, or TLS with `tls`) with the kit's client defaults (5 s per call, 2 s to
    /// connect); ``shutdown()`` closes that client.
    ///
    /// - Parameters:
    ///   - serviceName: this service's name as auth knows it (`chat`, `match`...).
    ///   - secret: auth's `KINDRED_AUTH_SERVICE_SECRET_<NAME>` for this service; nil = user tokens answer UNAVAILABLE.
    ///   - revocationStaleAfter: how long the set of ended sessions is trusted without news from auth.
    public convenience init(
        address: ServiceAddress,
        serviceName: String,
        secret: String?,
        tls: TLSContext? = nil,
        revocationStaleAfter: Duration = .seconds(5),
        logger: Logger
    ) {
        var configuration = GRPCClientConfiguration(address: address, tls: tls)
        configuration.defaultTimeout = .seconds(5)
        configuration.connectTimeout = .seconds(2)
        self.init(
            client: GRPCClient(configuration: configuration, logger: logger),
            serviceName: serviceName,
            secret: secret,
            revocationStaleAfter: revocationStaleAfter,
            logger: logger
        )
    }

    /// Connects to auth as a service's settings say (`KINDRED_<SERVER>_AUTH_ADDRESS`, `_SERVICE_SECRET`,
    /// `_REVOCATION_STALE_MS`): how every service but auth itself and the gateway checks its callers.
    ///
    /// ```swift
    /// self.auth = AuthConnection(settings: configuration.auth, serviceName: "chat", logger: logger)
    /// ```
    public convenience init(settings: AuthClientSettings, serviceName: String, logger: Logger) {
        self.init(
            address: settings.address, serviceName: serviceName, secret: settings.serviceSecret,
            revocationStaleAfter: settings.revocationStaleAfter, logger: logger)
    }

    /// Closes the client of auth (also one passed in: call this once, when the service stops).
    public func shutdown() async {
        await self.client?.close()
    }

    /// Fixed keys and no session check (tests, tools); `serviceTokens` signs nothing.
    public init(fixedKeys: [String: Ed25519PublicKey], serviceTokens: ServiceTokenSource? = nil, logger: Logger) {
        self.authenticator = CallerAuthenticator(keys: fixedKeys)
        self.access = ServiceAccess(authenticator: self.authenticator)
        self.serviceTokens = serviceTokens
        self.client = nil
        self.revocations = nil
        self.watcher = nil
        self.serviceName = nil
        self.logger = logger
    }

    /// The key warm-up (until auth answers, then one check that auth accepts the secret) and, with a secret, the
    /// revocation watcher.
    public var backgroundTasks: [BackgroundTask] {
        guard self.client != nil else { return [] }
        var tasks: [BackgroundTask] = [.once("auth-keys") { await self.warmUp() }]
        if let watcher = self.watcher {
            tasks.append(BackgroundTask("revocation-watcher") { await watcher.run() })
        }
        return tasks
    }

    /// Whether keys are known and, when session ends are followed, their set is current.
    public var isReady: Bool {
        self.authenticator.hasKeys && (self.watcher == nil || (self.revocations?.isFresh ?? true))
    }

    /// Whether the session `id` has ended (sign-out, sign-out everywhere, deactivation, password change), as far
    /// as the revocation feed heard within its bound says: nil when it cannot say (no feed, or a stale one).
    /// Services that keep things per session (notify's devices) clear them on `true`.
    public func sessionHasEnded(_ id: String) -> Bool? {
        switch self.revocations?.verdict(id) {
        case .revoked?: true
        case .live?: false
        case .unknown?, nil: nil
        }
    }

    /// Waits until ``isReady`` (tests), at most `timeout`.
    public func waitUntilReady(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !self.isReady {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    private func warmUp() async {
        var delay: Duration = .milliseconds(100)
        while !Task.isCancelled {
            if await self.authenticator.prefetch() {
                self.logger.info("auth signing keys loaded")
                await self.checkServiceSecret()
                return
            }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(5))
        }
    }

    /// Asks auth for the service token once, so a wrong secret shows in the log at start rather than as the
    /// first relay's or watcher's failure; the secret itself is never logged.
    private func checkServiceSecret() async {
        guard let tokens = self.serviceTokens, let name = self.serviceName else { return }
        do {
            _ = try await tokens.token()
            self.logger.info("service secret accepted by auth", metadata: ["service": "\(name)"])
        } catch {
            self.logger.warning(
                "auth refused the service secret: check KINDRED_AUTH_SERVICE_SECRET_<NAME> against this service's secret",
                metadata: ["service": "\(name)", "error": "\(error)"])
        }
    }
}
