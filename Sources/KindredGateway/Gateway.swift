import CoreMetrics
import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredOpenSSL
import KindredProto
import KindredServiceKit
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
    /// The notify service (devices, notification settings); nil when the cluster does not run it.
    let notify: Downstream?
    /// Auth's keys, the ended sessions (auth's WatchRevokedSessions) checked on every call with a user token, and
    /// the gateway's service token (IssueServiceToken with `KINDRED_GATEWAY_SERVICE_SECRET`): the kit's
    /// ``AuthConnection``, as every service has.
    let authConnection: AuthConnection
    var authenticator: CallerAuthenticator { self.authConnection.authenticator }
    var serviceTokens: ServiceTokenSource? { self.authConnection.serviceTokens }
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
        func client(_ address: ServiceAddress) -> GRPCClient {
            var client = GRPCClientConfiguration(address: address, tls: serviceTLS)
            client.metricsFactory = metricsFactory
            client.defaultTimeout = configuration.downstreamTimeout
            client.connectTimeout = .seconds(2)
            return GRPCClient(configuration: client, logger: logger)
        }
        let authClient = client(configuration.authAddress)
        let chatClient = configuration.chatAddress.map(client)
        let matchClient = configuration.matchAddress.map(client)
        let profileClient = configuration.profileAddress.map(client)
        let discoveryClient = configuration.discoveryAddress.map(client)
        // With discovery shards, shard 0 is `discoveryClient`; the others get clients of their own.
        let discoveryShards = configuration.discoveryShardAddresses.map { addresses in
            DiscoveryShardRouter(clients: [discoveryClient!] + addresses.dropFirst().map(client))
        }
        let notifyClient = configuration.notifyAddress.map(client)
        let metrics = self.metrics
        self.clients = [authClient] + [chatClient, matchClient, profileClient, discoveryClient, notifyClient].compactMap { $0 }
            + (discoveryShards?.clients.dropFirst() ?? [])
        self.discovery = discoveryClient.map {
            Downstream(
                name: "discovery", client: $0, timeout: configuration.downstreamTimeout, metrics: metrics, logger: logger,
                shards: discoveryShards)
        }
        self.notify = notifyClient.map {
            Downstream(name: "notify", client: $0, timeout: configuration.downstreamTimeout, metrics: metrics, logger: logger)
        }
        self.chat = chatClient.map {
            Downstream(name: "chat", client: $0, timeout: configuration.downstreamTimeout, metrics: metrics, logger: logger)
        }
        self.chatStreams = configuration.chatAddress.map { address in
            var streams = GRPCClientConfiguration(address: address, tls: serviceTLS)
            streams.metricsFactory = metricsFactory
            streams.connectTimeout = .seconds(2)
            return ChatStreamConnections(
                connections: configuration.chatStreamConnections, perUser: configuration.chatStreamsPerUser,
                configuration: streams, metrics: metrics, logger: logger)
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
        self.authConnection = AuthConnection(
            client: authClient,
            serviceName: "gateway",
            secret: configuration.serviceSecret,
            revocationStaleAfter: configuration.revocationStaleAfter,
            logger: logger
        )
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
            NotificationAPI(gateway: self), ActivityAPI(gateway: self),
        ]
    }

    /// What runs beside the gateway's server: auth's keys (warm-up) and session ends (the revocation watcher),
    /// and the media port.
    public var backgroundTasks: [BackgroundTask] {
        var tasks = self.authConnection.backgroundTasks
        if let media = self.mediaServer {
            tasks.append(BackgroundTask("media-port") { try await media.run() })
        }
        return tasks
    }

    /// Waits until auth's keys are known and, when the gateway follows session ends, their set is current
    /// (tests and readiness), at most `timeout`.
    public func waitUntilReady(timeout: Duration) async -> Bool {
        await self.authConnection.waitUntilReady(timeout: timeout)
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
                guard self.authenticator.hasKeys else {
                    throw GatewayErrors.make(.unavailable, "Sign-in is temporarily unavailable; retry with backoff", reason: "UNAVAILABLE")
                }
                if error.code == .unavailable {
                    self.metrics.revocationUnavailable()
                    throw GatewayErrors.make(.unavailable, CallerAuthenticator.sessionCheckUnavailable, reason: "UNAVAILABLE")
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

    func take(_ limiter: TokenBucketLimiter, _ key: String, bucket: String) throws(RPCError) {
        if let wait = limiter.acquire(key) {
            self.metrics.rateLimited(bucket: bucket)
            throw GatewayErrors.rateLimited(retryAfter: wait)
        }
    }

    /// With a proxy header configured, the address the trusted proxies put in it (`ForwardedClientAddress`);
    /// else, or when it has none, the peer's host.
    func clientAddress(_ context: ServerContext) -> String {
        self.clientAddress(peer: context.peerHost) { header in
            context.metadata.compactMap { entry -> String? in
                guard entry.key == header, case .string(let value) = entry.value else { return nil }
                return value
            }
        }
    }

    /// The same for any protocol (the media port's HTTP/1.1 too): `values` gives a header's values by its name.
    func clientAddress(peer: @autoclosure () -> String, headerValues values: (String) -> [String]) -> String {
        if let header = self.configuration.clientIPHeader {
            let forwarded = ForwardedClientAddress(trustedProxies: self.configuration.trustedProxies)
            if let address = forwarded.clientAddress(headerValues: values(header)) { return address }
        }
        return peer()
    }
}
