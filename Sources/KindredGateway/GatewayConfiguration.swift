import Foundation
import KindredGRPCServices
import KindredServiceKit

/// Everything the gateway can be configured with. `init(environment:)` reads the `KINDRED_GATEWAY_*`
/// environment variables; each key, its type and default are listed here and in services/gateway/README.md.
public struct GatewayConfiguration: Sendable {
    /// The public gRPC port, the admin port, TLS and the access log, read like every server's
    /// (`ServerEndpointSettings`): `KINDRED_GATEWAY_LISTEN` (default `127.0.0.1:50050`),
    /// `KINDRED_GATEWAY_ADMIN_LISTEN` (default `127.0.0.1:50150`, or `off`), `KINDRED_GATEWAY_TLS_CERT_FILE` /
    /// `KINDRED_GATEWAY_TLS_KEY_FILE` (TLS with ALPN h2 when both are set, h2c otherwise), `KINDRED_GATEWAY_ACCESS_LOG`
    /// (default true).
    public var endpoint = ServerEndpointSettings(defaultPort: 50050)
    /// `KINDRED_GATEWAY_AUTH_ADDRESS` (host:port, or replicas: a comma-separated list), default `127.0.0.1:50051`.
    public var authAddress = ServiceAddress(host: "127.0.0.1", port: 50051)
    /// `KINDRED_GATEWAY_PROFILE_ADDRESS`, `..._DISCOVERY_ADDRESS`, `..._MATCH_ADDRESS`, `..._CHAT_ADDRESS`,
    /// `..._NOTIFY_ADDRESS` (host:port, a comma-separated list of replicas, or `off`), default none: the services this cluster runs (run-cluster.sh and compose.yaml set
    /// every one). Parts of the API backed by a service that is not configured answer UNIMPLEMENTED, and
    /// GetHome lists them in `unavailable_parts`.
    public var profileAddress: ServiceAddress?
    public var discoveryAddress: ServiceAddress?
    /// `KINDRED_GATEWAY_DISCOVERY_SHARDS` (host:port,… one per discovery shard, in shard order), default none:
    /// discovery as geographic shards; each deck, pick and search goes to the shard owning the viewer's cell
    /// (`DiscoveryShardRouter`). Replaces `..._DISCOVERY_ADDRESS` when set.
    public var discoveryShardAddresses: [ServiceAddress]?
    public var matchAddress: ServiceAddress?
    public var chatAddress: ServiceAddress?
    public var notifyAddress: ServiceAddress?
    /// `KINDRED_GATEWAY_STREAM_MAX_SECONDS` (int, 60..86400), default 86400: the longest a proxied stream
    /// (chat's Subscribe) lasts when the client sets no shorter deadline; heartbeats keep it alive meanwhile.
    public var streamMaxDuration: Duration = .seconds(86_400)
    /// `KINDRED_GATEWAY_CHAT_STREAM_CONNECTIONS` (int, 1..1000), default 32: connections to chat for Subscribe
    /// streams alone, 100 streams each (ChatStreamConnections): the live subscribers one gateway carries.
    public var chatStreamConnections = 32
    /// `KINDRED_GATEWAY_CHAT_STREAMS_PER_USER` (int, 1..100), default 5: live Subscribe streams one account may
    /// hold on this gateway (its devices); and once the gateway's streams are nine tenths taken, an account that
    /// holds one gets no other (`ChatStreamShares`). Past either: RESOURCE_EXHAUSTED, RATE_LIMITED, retry after 10 s.
    public var chatStreamsPerUser = 5
    /// `KINDRED_GATEWAY_SERVICE_SECRET` (string, 32..256), default none: the gateway's secret for auth's
    /// IssueServiceToken (auth's `KINDRED_AUTH_SERVICE_SECRET_GATEWAY`). Required in practice: the gateway
    /// subscribes to auth's WatchRevokedSessions with that service token, and without the stream every call
    /// with a user token answers UNAVAILABLE (fail closed). A missing or refused secret is logged at start.
    public var serviceSecret: String?
    /// `KINDRED_GATEWAY_REVOCATION_STALE_MS` (int, 2000..60000), default 5000: how long the gateway trusts its
    /// set of ended sessions without a message on auth's WatchRevokedSessions stream (heartbeat every second);
    /// past it, calls with a user token answer UNAVAILABLE until the stream is back.
    public var revocationStaleAfter: Duration = .seconds(5)
    /// `KINDRED_GATEWAY_SERVICE_TLS_CA_FILE` (PEM path), default none: when set, calls to the services use TLS
    /// and trust this CA; h2c otherwise (a private network).
    public var serviceTLSCAFile: String?
    /// `KINDRED_GATEWAY_DOWNSTREAM_TIMEOUT_MS` (int), default 5000: the deadline of a downstream call when the
    /// client's remaining deadline is longer or absent. This is also what caps long client deadlines: no
    /// unary call of the public API waits on a service for longer.
    public var downstreamTimeout: Duration = .seconds(5)
    /// `KINDRED_GATEWAY_PART_TIMEOUT_MS` (int), default 1500: how long an aggregating call (GetHome) waits for a
    /// non-essential part before answering without it.
    public var partTimeout: Duration = .milliseconds(1500)
    /// `KINDRED_GATEWAY_CLIENT_RATE` (calls/s, decimal) and `KINDRED_GATEWAY_CLIENT_BURST` (int), default 20
    /// and 60: token bucket per client address.
    public var clientRate = 20.0
    public var clientBurst = 60
    /// `KINDRED_GATEWAY_ACCOUNT_RATE` (calls/s) and `KINDRED_GATEWAY_ACCOUNT_BURST` (int), default 10 and 40:
    /// token bucket per signed-in account (all its devices together).
    public var accountRate = 10.0
    public var accountBurst = 40
    /// `KINDRED_GATEWAY_ANONYMOUS_RATE` (calls/s) and `KINDRED_GATEWAY_ANONYMOUS_BURST` (int), default 1 and 10:
    /// an extra, stricter bucket per client address for the calls that need no token (sign-up, sign-in,
    /// password reset...), on top of auth's own per-account limits.
    public var anonymousRate = 1.0
    public var anonymousBurst = 10
    /// `KINDRED_GATEWAY_CLIENT_IP_HEADER` (header name), default none: take the client address from this header
    /// (an X-Forwarded-For-style list that each proxy appends to) instead of the peer address: the entry
    /// `trustedProxies` places from the right (`ForwardedClientAddress`). Only behind trusted proxies that append
    /// to it; otherwise clients could pick their own rate-limit key.
    public var clientIPHeader: String?
    /// `KINDRED_GATEWAY_TRUSTED_PROXIES` (int, 1..16), default 1: how many proxies in front of the gateway append to
    /// `clientIPHeader`. The client's address is the entry this many places from the right (1: the last); with
    /// fewer entries, or no address there, the connection's address is used. Read only with the header set.
    public var trustedProxies = 1
    /// `KINDRED_GATEWAY_WEB_ROOT` (folder), default none: the web app's files (the repository's `web/`), served
    /// by the media port under `/app/` (`WebAppFiles`; read once at start).
    public var webRoot: String?
    /// `KINDRED_GATEWAY_WEB_API_URL` (URL), default none: where the web app calls the API (the gateway's public
    /// URL, e.g. `https://api.example.com`); none: the page's own host with the gateway's port. Allow the web
    /// app's origin in the gateway's CORS settings.
    public var webAPIURL: String?
    /// `KINDRED_MEDIA_URL_KEY` (string, 32..256; the same value the profile service has), default none: the HMAC
    /// key of signed photo URLs. With it and a profile address the gateway opens its media port.
    public var mediaURLKey: String?
    /// `KINDRED_GATEWAY_MEDIA_LISTEN` (host:port or `off`), default `127.0.0.1:50250`: the media port, plain
    /// HTTP/1.1 GET of signed photo URLs (put a CDN or TLS proxy in front of it).
    public var mediaListen: HostPort? = HostPort(host: "127.0.0.1", port: 50250)
    /// `KINDRED_GATEWAY_MEDIA_HEADER_TIMEOUT_MS` (int, 100..300000, default 10000),
    /// `KINDRED_GATEWAY_MEDIA_BODY_TIMEOUT_MS` (100..300000, default 30000), `KINDRED_GATEWAY_MEDIA_IDLE_TIMEOUT_MS`
    /// (100..3600000, default 60000), `KINDRED_GATEWAY_MEDIA_MAX_CONNECTIONS` (1..100000, default 2048): the media
    /// port's timeouts and connection cap (`HTTP1Limits`). The cap keeps slow clients from taking the file
    /// descriptors the gRPC port shares.
    public var mediaLimits = HTTP1Limits(maxConnections: 2048)
    /// `KINDRED_GATEWAY_CORS_ORIGINS` (comma-separated origins, e.g. `https://app.example.com`), default none:
    /// the browser origins that may call the public API cross-origin (gRPC-Web and Connect; preflights cached
    /// for `KINDRED_GATEWAY_CORS_MAX_AGE_SECONDS`, int 0..86400, default 7200). Empty: no cross-origin call.
    /// Bearer tokens only: credentials (cookies) are never allowed.
    public var corsOrigins: Set<String> = []
    public var corsMaxAge: Duration = .seconds(7200)
    /// `KINDRED_GATEWAY_WEB_HEADER_TIMEOUT_MS` (int, 100..300000, default 10000), `KINDRED_GATEWAY_WEB_BODY_TIMEOUT_MS`
    /// (100..300000, default 30000), `KINDRED_GATEWAY_WEB_IDLE_TIMEOUT_MS` (100..3600000, default 60000): the
    /// deadlines of HTTP/1.1 connections on the gRPC port (gRPC-Web and Connect from browsers and curl), as on the
    /// media port (`HTTP1Limits`); `KINDRED_GATEWAY_WEB_MAX_CONNECTIONS` (1..100000, default 4096): HTTP/1.1
    /// connections open at once on the gRPC port (a browser opens up to six per origin; HTTP/2 ones do not count).
    public var webLimits = HTTP1Limits(maxConnections: 4096)
    public init() {}

    /// Reads the `KINDRED_GATEWAY_*` settings; a bad value throws `ConfigurationError` naming the key.
    public init(environment: [String: String]) throws {
        try self.init(EnvironmentReader(environment))
    }

    public init(_ reader: EnvironmentReader) throws {
        self.endpoint = try ServerEndpointSettings(prefix: "KINDRED_GATEWAY_", defaultPort: 50050, environment: reader)
        self.authAddress = try reader.serviceAddress("KINDRED_GATEWAY_AUTH_ADDRESS", default: self.authAddress)
        self.profileAddress = try reader.optionalServiceAddress("KINDRED_GATEWAY_PROFILE_ADDRESS", default: nil)
        self.discoveryAddress = try reader.optionalServiceAddress("KINDRED_GATEWAY_DISCOVERY_ADDRESS", default: nil)
        self.discoveryShardAddresses = try DiscoveryShardRouter.addresses(reader, "KINDRED_GATEWAY_DISCOVERY_SHARDS")
        if let shards = self.discoveryShardAddresses { self.discoveryAddress = shards[0] }
        self.matchAddress = try reader.optionalServiceAddress("KINDRED_GATEWAY_MATCH_ADDRESS", default: nil)
        self.chatAddress = try reader.optionalServiceAddress("KINDRED_GATEWAY_CHAT_ADDRESS", default: nil)
        self.notifyAddress = try reader.optionalServiceAddress("KINDRED_GATEWAY_NOTIFY_ADDRESS", default: nil)
        self.streamMaxDuration = .seconds(
            try reader.seconds("KINDRED_GATEWAY_STREAM_MAX_SECONDS", default: 86_400, in: 60...86_400))
        self.chatStreamConnections = try reader.int(
            "KINDRED_GATEWAY_CHAT_STREAM_CONNECTIONS", default: self.chatStreamConnections, in: 1...1000)
        self.chatStreamsPerUser = try reader.int(
            "KINDRED_GATEWAY_CHAT_STREAMS_PER_USER", default: self.chatStreamsPerUser, in: 1...100)
        self.serviceTLSCAFile = reader.string("KINDRED_GATEWAY_SERVICE_TLS_CA_FILE")
        self.serviceSecret = try reader.secret("KINDRED_GATEWAY_SERVICE_SECRET", length: 32...256)
        self.revocationStaleAfter = try reader.milliseconds(
            "KINDRED_GATEWAY_REVOCATION_STALE_MS", default: self.revocationStaleAfter, in: 2000...60_000)
        self.downstreamTimeout = try reader.milliseconds(
            "KINDRED_GATEWAY_DOWNSTREAM_TIMEOUT_MS", default: self.downstreamTimeout, in: 10...300_000)
        self.partTimeout = try reader.milliseconds("KINDRED_GATEWAY_PART_TIMEOUT_MS", default: self.partTimeout, in: 10...60_000)
        self.clientRate = try reader.double("KINDRED_GATEWAY_CLIENT_RATE", default: self.clientRate, in: 0.01...1_000_000)
        self.clientBurst = try reader.int("KINDRED_GATEWAY_CLIENT_BURST", default: self.clientBurst, in: 1...1_000_000)
        self.accountRate = try reader.double("KINDRED_GATEWAY_ACCOUNT_RATE", default: self.accountRate, in: 0.01...1_000_000)
        self.accountBurst = try reader.int("KINDRED_GATEWAY_ACCOUNT_BURST", default: self.accountBurst, in: 1...1_000_000)
        self.anonymousRate = try reader.double(
            "KINDRED_GATEWAY_ANONYMOUS_RATE", default: self.anonymousRate, in: 0.01...1_000_000)
        self.anonymousBurst = try reader.int(
            "KINDRED_GATEWAY_ANONYMOUS_BURST", default: self.anonymousBurst, in: 1...1_000_000)
        self.clientIPHeader = reader.string("KINDRED_GATEWAY_CLIENT_IP_HEADER")?.lowercased()
        self.trustedProxies = try reader.int(
            "KINDRED_GATEWAY_TRUSTED_PROXIES", default: self.trustedProxies, in: 1...16)
        self.webRoot = reader.string("KINDRED_GATEWAY_WEB_ROOT")
        self.webAPIURL = reader.string("KINDRED_GATEWAY_WEB_API_URL")
        self.mediaURLKey = try reader.secret("KINDRED_MEDIA_URL_KEY", length: 32...256)
        if reader.string("KINDRED_GATEWAY_MEDIA_LISTEN") == "off" {
            self.mediaListen = nil
        } else {
            self.mediaListen = try reader.address("KINDRED_GATEWAY_MEDIA_LISTEN", default: self.mediaListen!)
        }
        self.mediaLimits = try HTTP1Limits(prefix: "KINDRED_GATEWAY_MEDIA_", defaults: self.mediaLimits, environment: reader)
        self.webLimits = try HTTP1Limits(prefix: "KINDRED_GATEWAY_WEB_", defaults: self.webLimits, environment: reader)
        self.corsOrigins = reader.list("KINDRED_GATEWAY_CORS_ORIGINS", default: [])
        self.corsMaxAge = .seconds(try reader.seconds("KINDRED_GATEWAY_CORS_MAX_AGE_SECONDS", default: 7200, in: 0...86_400))
    }
}
