import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredOpenSSL
import KindredProto
import Logging

/// What every service behind the gateway needs from auth to check its callers itself (the gateway is not the
/// only gate): auth's public keys (fetched, refetched for unknown key ids), the service's own token (auth's
/// IssueServiceToken with `KINDRED_AUTH_SERVICE_SECRET_<NAME>`), and auth's session ends followed through
/// WatchRevokedSessions, so a signed-out session is refused here too.
///
/// ```swift
/// let auth = AuthLink(address: configuration.authAddress, serviceName: "chat",
///                     secret: configuration.serviceSecret, logger: logger)
/// runner.background += auth.backgroundTasks
/// let caller = try await auth.authenticator.authenticate(context)
/// ```
///
/// Without a secret the service cannot follow session ends: every call with a user token answers UNAVAILABLE
/// (fail closed); service tokens still work.
public final class AuthLink: Sendable {
    /// Verifies access tokens (keys from auth) and refuses ended sessions.
    public let authenticator: CallerAuthenticator
    /// The service's own token for calls to other services; nil without a secret.
    public let serviceTokens: ServiceTokenSource?
    /// Ended sessions, fed by `watcher`.
    public let revocations: RevokedSessions
    /// The client of auth.
    public let client: GRPCClient
    private let watcher: RevocationWatcher?
    private let logger: Logger

    /// - Parameters:
    ///   - address: auth's gRPC address.
    ///   - serviceName: this service's name as auth knows it (`chat`, `match`...).
    ///   - secret: auth's `KINDRED_AUTH_SERVICE_SECRET_<NAME>` for this service.
    ///   - tls: TLS to auth (a CA), h2c when nil.
    ///   - revocationStaleAfter: how long the set of ended sessions is trusted without news from auth.
    public init(
        address: HostPort,
        serviceName: String,
        secret: String?,
        tls: TLSContext? = nil,
        revocationStaleAfter: Duration = .seconds(5),
        logger: Logger
    ) {
        var configuration = GRPCClientConfiguration(host: address.host, port: address.port, tls: tls)
        configuration.defaultTimeout = .seconds(5)
        configuration.connectTimeout = .seconds(2)
        let client = GRPCClient(configuration: configuration, logger: logger)
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
            logger.error("no service secret: session ends cannot be followed, calls with a user token answer UNAVAILABLE")
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
    }

    /// The loops to run beside the server: the key warm-up (once) and the revocation watcher.
    public var backgroundTasks: [BackgroundTask] {
        var tasks: [BackgroundTask] = [.once("auth-keys") { await self.warmUp() }]
        if let watcher = self.watcher {
            tasks.append(BackgroundTask("revocation-watcher") { await watcher.run() })
        }
        return tasks
    }

    /// Fetches auth's keys until it answers (100 ms doubling to 5 s).
    public func warmUp() async {
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

    /// Waits until auth's keys are known and the set of ended sessions is current, at most `timeout` (tests,
    /// readiness). True when ready.
    public func waitUntilReady(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !(self.authenticator.hasKeys && (self.watcher == nil || self.revocations.isFresh)) {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    /// Closes the client of auth.
    public func shutdown() async {
        await self.client.close()
    }
}
