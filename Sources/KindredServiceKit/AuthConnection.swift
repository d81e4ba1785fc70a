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
    private let logger: Logger

    public init(
        client: GRPCClient,
        serviceName: String,
        secret: String?,
        revocationStaleAfter: Duration = .seconds(5),
        logger: Logger
    ) {
        self.client = client
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
                "service secret is not set: session ends cannot be followed, calls with a user token answer UNAVAILABLE")
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

    /// Fixed keys and no session check (tests, tools); `serviceTokens` signs nothing.
    public init(fixedKeys: [String: Ed25519PublicKey], serviceTokens: ServiceTokenSource? = nil, logger: Logger) {
        self.authenticator = CallerAuthenticator(keys: fixedKeys)
        self.access = ServiceAccess(authenticator: self.authenticator)
        self.serviceTokens = serviceTokens
        self.client = nil
        self.revocations = nil
        self.watcher = nil
        self.logger = logger
    }

    /// The key warm-up (until auth answers) and, with a secret, the revocation watcher.
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
                return
            }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(5))
        }
    }
}
