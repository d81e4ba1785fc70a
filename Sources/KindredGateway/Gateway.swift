import CoreMetrics
import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredOpenSSL
import KindredProto
import Logging
import NIOCore

/// The gateway's shared machinery: the services behind it, token verification, rate limits and fan-out.
/// The public API services (AccountAPI, AdminAPI, HomeAPI) are thin: each RPC admits its caller here, calls
/// one or more services, and converts the answer.
public final class Gateway: Sendable {
    public let configuration: GatewayConfiguration
    public let metrics: GatewayMetrics
    let auth: Downstream
    /// The chat service; nil when this cluster runs none.
    let chat: Downstream?
    /// The connections chat's Subscribe streams are proxied on (apart from `chat`'s); nil without chat.
    let chatStreams: ChatStreamConnections?
    /// The match service (swipes, matches, blocks, reports); nil when the cluster does not run it.
    let match: Downstream?
    /// The profile service (profiles, photos, communities, cards for lists); nil when the cluster does not run it.
    let profile: Downstream?
    /// The discovery service (decks, top picks, member search); nil when the cluster does not run it.
    let discovery: Downstream?
    let authenticator: CallerAuthenticator
    /// Ended sessions, fed by auth's WatchRevokedSessions (`watcher`), checked on every call with a user token.
    let revocations: RevokedSessions
    private let watcher: RevocationWatcher?
    /// The gateway's service token (auth's IssueServiceToken with `KINDRED_GATEWAY_SERVICE_SECRET`).
    let serviceTokens: ServiceTokenSource?
    let clientLimiter: TokenBucketLimiter
    let accountLimiter: TokenBucketLimiter
    let anonymousLimiter: TokenBucketLimiter
    let logger: Logger
    private let clients: [GRPCClient]

    /// `metricsFactory`: the server's backend (`ServerMetrics.factory`); the gateway's counters go there.
    public init(configuration: GatewayConfiguration, metricsFactory: any MetricsFactory, logger: Logger) throws {
        self.configuration = configuration
        self.metrics = GatewayMetrics(factory: metricsFactory)
        self.logger = logger
        let serviceTLS = try configuration.serviceTLSCAFile.map {
            try TLSContext(configuration: .client(trustRoots: .file($0)))
        }
        func client(_ address: HostPort) -> GRPCClient {
            var client = GRPCClientConfiguration(host: address.host, port: address.port, tls: serviceTLS)
            client.defaultTimeout = configuration.downstreamTimeout
            client.connectTimeout = .seconds(2)
            return GRPCClient(configuration: client, logger: logger)
        }
        let authClient = client(configuration.authAddress)
        let chatClient = configuration.chatAddress.map(client)
        let matchClient = configuration.matchAddress.map(client)
        let profileClient = configuration.profileAddress.map(client)
        let discoveryClient = configuration.discoveryAddress.map(client)
        let metrics = self.metrics
        self.clients = [authClient] + [chatClient, matchClient, profileClient, discoveryClient].compactMap { $0 }
        self.discovery = discoveryClient.map {
            Downstream(name: "discovery", client: $0, timeout: configuration.downstreamTimeout, metrics: metrics, logger: logger)
        }
        self.chat = chatClient.map {
            Downstream(name: "chat", client: $0, timeout: configuration.downstreamTimeout, metrics: metrics, logger: logger)
        }
        self.chatStreams = configuration.chatAddress.map { address in
            var streams = GRPCClientConfiguration(host: address.host, port: address.port, tls: serviceTLS)
            streams.connectTimeout = .seconds(2)
            return ChatStreamConnections(
                connections: configuration.chatStreamConnections, configuration: streams, logger: logger)
        }
        self.match = matchClient.map {
            Downstream(name: "match", client: $0, timeout: configuration.downstreamTimeout, metrics: metrics, logger: logger)
        }
        self.profile = profileClient.map {
            Downstream(name: "profile", client: $0, timeout: configuration.downstreamTimeout, metrics: metrics, logger: logger)
        }
        self.auth = Downstream(
            name: "auth",
            client: authClient,
            timeout: configuration.downstreamTimeout,
            metrics: self.metrics,
            logger: logger
        )
        let revocations = RevokedSessions(staleAfter: configuration.revocationStaleAfter)
        self.revocations = revocations
        if let secret = configuration.serviceSecret {
            let tokens = ServiceTokenSource(auth: authClient, serviceName: "gateway", secret: secret)
            self.serviceTokens = tokens
            self.watcher = RevocationWatcher(client: authClient, revocations: revocations, logger: logger) {
                try await tokens.token()
            }
        } else {
            self.serviceTokens = nil
            self.watcher = nil
            logger.error(
                "KINDRED_GATEWAY_SERVICE_SECRET is not set: session ends cannot be followed, calls with a user token answer UNAVAILABLE"
            )
        }
        self.authenticator = CallerAuthenticator(refetchInterval: .seconds(5), revocations: revocations) {
            let response = try await authClient.unary(
                AuthApi.AuthService.Method.getPublicKeys,
                AuthApi.GetPublicKeysRequest(),
                options: CallOptions(timeout: .seconds(3))
            )
            var keys: [String: Ed25519PublicKey] = [:]
            for key in response.keys where key.curve == "Ed25519" && key.status != .retired {
                keys[key.keyId] = try Ed25519PublicKey(rawRepresentation: key.publicKey)
            }
            return keys
        }
        self.clientLimiter = TokenBucketLimiter(rate: configuration.clientRate, burst: configuration.clientBurst)
        self.accountLimiter = TokenBucketLimiter(rate: configuration.accountRate, burst: configuration.accountBurst)
        self.anonymousLimiter = TokenBucketLimiter(
            rate: configuration.anonymousRate,
            burst: configuration.anonymousBurst
        )
    }

    /// The public API services, ready to serve.
    public var services: [any GRPCService] {
        [
            AccountAPI(gateway: self), HomeAPI(gateway: self), AdminAPI(gateway: self), ProfileAPI(gateway: self),
            DeckAPI(gateway: self), MatchAPI(gateway: self), ChatAPI(gateway: self),
        ]
    }

    /// What runs beside the gateway's server: following auth's session ends (`WatchRevokedSessions`), and
    /// fetching auth's keys once at start (calls that arrive first fetch too).
    public var backgroundTasks: [BackgroundTask] {
        var tasks: [BackgroundTask] = [.once("key-warm-up") { await self.warmUp() }]
        if let watcher = self.watcher {
            tasks.append(BackgroundTask("revocation-watcher") { await watcher.run() })
        }
        if let media = self.mediaServer {
            tasks.append(BackgroundTask("media-port") { try await media.run() })
        }
        return tasks
    }

    /// Fetches auth's keys until it answers, then checks the service secret.
    public func warmUp() async {
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

    /// Waits until auth's keys are known and, when the gateway follows session ends, their set is current
    /// (tests and readiness), at most `timeout`. The key warm-up and the watcher do the work; this only watches.
    public func waitUntilReady(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !(self.authenticator.hasKeys && (self.watcher == nil || self.revocations.isFresh)) {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    /// Asks auth for the gateway's service token; a refusal is logged (the secret is not).
    private func checkServiceSecret() async {
        guard let tokens = self.serviceTokens else { return }
        do {
            _ = try await tokens.token()
            self.logger.info("service secret accepted by auth")
        } catch {
            self.logger.warning(
                "auth refused KINDRED_GATEWAY_SERVICE_SECRET: check KINDRED_AUTH_SERVICE_SECRET_GATEWAY",
                metadata: ["error": "\(error)"])
        }
    }

    public func shutdown() async {
        for client in self.clients { await client.close() }
        await self.chatStreams?.close()
    }

    // MARK: Admission

    /// Admits one call: rate limits by client address (and by account once known), verifies the access token
    /// when the RPC needs one, echoes the request id, and prepares the metadata forwarded to services.
    func admit(_ context: ServerContext, _ access: Access) async throws(RPCError) -> Caller {
        context.setResponseMetadata([GRPCRequestID.metadataKey: .string(context.requestID)])
        let address = self.clientAddress(context)
        try self.take(self.clientLimiter, address, bucket: "client")
        if case .anyone = access { try self.take(self.anonymousLimiter, address, bucket: "anonymous") }

        var forwarded: Metadata = ["x-kindred-client-ip": .string(address)]
        var identity: CallerIdentity?
        switch access {
        case .anyone:
            break
        case .tokenOptional:
            if let authorization = context.metadata["authorization"] { forwarded.add("authorization", authorization) }
        case .user, .admin:
            guard let authorization = context.metadata["authorization"] else {
                self.metrics.rejectedToken()
                throw GatewayErrors.unauthenticated("Missing authorization metadata: send `authorization: Bearer <access token>`")
            }
            let verified: CallerIdentity
            do {
                verified = try await self.authenticator.authenticate(authorization: authorization)
            } catch {
                if error.code == .unavailable {
                    self.metrics.revocationUnavailable()
                    throw GatewayErrors.make(.unavailable, CallerAuthenticator.sessionCheckUnavailable, reason: "UNAVAILABLE")
                }
                guard self.authenticator.hasKeys else {
                    throw GatewayErrors.make(.unavailable, "Sign-in is temporarily unavailable; retry with backoff", reason: "UNAVAILABLE")
                }
                self.metrics.rejectedToken()
                throw GatewayErrors.unauthenticated("The access token is missing, expired or invalid: refresh it and retry")
            }
            guard let userID = verified.userID else {
                throw GatewayErrors.make(.permissionDenied, "A user access token is required", reason: "PERMISSION_DENIED")
            }
            if case .admin = access, !verified.isAdmin {
                throw GatewayErrors.make(.permissionDenied, "This call needs the admin role", reason: "PERMISSION_DENIED")
            }
            try self.take(self.accountLimiter, userID, bucket: "account")
            forwarded.add("authorization", authorization)
            identity = verified
        }
        return Caller(identity: identity, clientAddress: address, forwardedMetadata: forwarded)
    }

    private func take(_ limiter: TokenBucketLimiter, _ key: String, bucket: String) throws(RPCError) {
        if let wait = limiter.acquire(key) {
            self.metrics.rateLimited(bucket: bucket)
            throw GatewayErrors.rateLimited(retryAfter: wait)
        }
    }

    /// The configured proxy header's first address when set and present, else the peer's host.
    func clientAddress(_ context: ServerContext) -> String {
        if let header = self.configuration.clientIPHeader, let value = context.metadata[header],
            let first = value.split(separator: ",").first?.trimmingCharacters(in: .whitespaces), !first.isEmpty
        {
            return first
        }
        return context.peerHost
    }
}
