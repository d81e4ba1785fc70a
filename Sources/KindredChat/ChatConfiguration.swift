import Foundation
import KindredGRPCServices
import KindredServiceKit

/// Everything the chat service can be configured with, read from `KINDRED_CHAT_*` (services/chat/README.md lists
/// the same keys). A bad value throws `ConfigurationError` naming the key.
public struct ChatConfiguration: Sendable {
    /// `KINDRED_CHAT_LISTEN` (default `127.0.0.1:50055`), `KINDRED_CHAT_ADMIN_LISTEN` (default `127.0.0.1:50155`, or
    /// `off`), `KINDRED_CHAT_TLS_CERT_FILE` / `_TLS_KEY_FILE`, `KINDRED_CHAT_ACCESS_LOG` (`ServerEndpointSettings`).
    public var endpoint = ServerEndpointSettings(defaultPort: ChatServerDefinition.defaultPort)
    /// `KINDRED_CHAT_DATABASE_URL`, `_DATABASE_POOL_SIZE` (1...500, default 10), `_MIGRATIONS_DIR`.
    public var database = DatabaseSettings(server: "chat", schema: "chat")
    /// `KINDRED_CHAT_AUTH_ADDRESS`, `_SERVICE_SECRET`, `_REVOCATION_STALE_MS`: how chat reaches auth
    /// (`AuthClientSettings`).
    public var auth = AuthClientSettings()
    /// `KINDRED_CHAT_HEARTBEAT_MS` (int, 100..300000), default 30000: a Subscribe stream silent this long gets a
    /// heartbeat (and re-reads its log in case a notification was lost).
    public var heartbeatInterval: Duration = .seconds(30)
    /// `KINDRED_CHAT_SUBSCRIBER_BUFFER` (int, 16..100000), default 1024: events one stream may have queued; past
    /// it the stream ends with SUBSCRIBER_TOO_SLOW and the client resumes.
    public var subscriberBuffer = 1024
    /// `KINDRED_CHAT_MAX_STREAMS_PER_USER` (int, 1..100), default 10: concurrent Subscribe streams of one user
    /// (devices) on one server; more answer RESOURCE_EXHAUSTED.
    public var maxStreamsPerUser = 10
    /// `KINDRED_CHAT_EVENT_RETENTION_SECONDS` (int, 60..2592000), default 86400: how long event logs are kept
    /// for resuming; an older resume token gets ResyncRequired.
    public var eventRetentionSeconds: Int64 = 86_400
    /// `KINDRED_CHAT_DEFAULT_HOURLY_MESSAGE_LIMIT` (int, 1..10000), default 300: messages per sender per rolling
    /// hour in communities chat has not yet heard of (CommunityUpdated sets each community's own).
    public var defaultHourlyMessageLimit = 300
    /// `KINDRED_CHAT_TYPING_PER_MINUTE` (int, 1..600), default 20 (burst 5): SendTyping calls per user and thread.
    public var typingPerMinute = 20
    /// `KINDRED_CHAT_EVENT_CONSUMERS`, `_EVENT_POLL_MS`: where chat's events (MessageSent) go (`EventRelaySettings`).
    public var events = EventRelaySettings()

    public init() {}

    public init(_ reader: EnvironmentReader) throws {
        self.endpoint = try ChatServerDefinition.endpoint(reader)
        self.database = try ChatServerDefinition.database(reader) ?? self.database
        self.auth = try AuthClientSettings(server: "chat", environment: reader)
        self.heartbeatInterval = try reader.milliseconds(
            "KINDRED_CHAT_HEARTBEAT_MS", default: self.heartbeatInterval, in: 100...300_000)
        self.subscriberBuffer = try reader.int("KINDRED_CHAT_SUBSCRIBER_BUFFER", default: self.subscriberBuffer, in: 16...100_000)
        self.maxStreamsPerUser = try reader.int("KINDRED_CHAT_MAX_STREAMS_PER_USER", default: self.maxStreamsPerUser, in: 1...100)
        self.eventRetentionSeconds = try reader.seconds(
            "KINDRED_CHAT_EVENT_RETENTION_SECONDS", default: self.eventRetentionSeconds, in: 60...2_592_000)
        self.defaultHourlyMessageLimit = try reader.int(
            "KINDRED_CHAT_DEFAULT_HOURLY_MESSAGE_LIMIT", default: self.defaultHourlyMessageLimit, in: 1...10_000)
        self.typingPerMinute = try reader.int("KINDRED_CHAT_TYPING_PER_MINUTE", default: self.typingPerMinute, in: 1...600)
        self.events = try EventRelaySettings(server: "chat", environment: reader)
    }
}
