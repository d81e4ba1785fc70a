import Foundation
import KindredGRPCServices
import KindredPush
import KindredServiceKit

/// Everything the notify service can be configured with, read from `KINDRED_NOTIFY_*` (services/notify/README.md
/// lists the same keys). A bad value throws `ConfigurationError` naming the key.
public struct NotifyConfiguration: Sendable {
    /// `KINDRED_NOTIFY_LISTEN` (default `127.0.0.1:50056`), `KINDRED_NOTIFY_ADMIN_LISTEN` (default
    /// `127.0.0.1:50156`, or `off`), `KINDRED_NOTIFY_TLS_CERT_FILE` / `_TLS_KEY_FILE`, `KINDRED_NOTIFY_ACCESS_LOG`
    /// (`ServerEndpointSettings`).
    public var endpoint = ServerEndpointSettings(defaultPort: NotifyServerDefinition.defaultPort)
    /// `KINDRED_NOTIFY_DATABASE_URL`, `_DATABASE_POOL_SIZE` (1...500, default 10), `_MIGRATIONS_DIR`.
    public var database = DatabaseSettings(server: "notify", schema: "notify")
    /// `KINDRED_NOTIFY_AUTH_ADDRESS`, `_SERVICE_SECRET`, `_REVOCATION_STALE_MS`: how notify reaches auth
    /// (`AuthClientSettings`), for its keys, the service token and its session ends (which remove the devices
    /// registered under them). The secret is required in practice: without it every call with a user token
    /// answers UNAVAILABLE.
    public var auth = AuthClientSettings()
    /// `KINDRED_EVENTS_NATS_URL`: events come from NATS JetStream instead of `DeliverEvents` (``EventBusSettings``).
    public var eventBus = EventBusSettings()
    /// `KINDRED_NOTIFY_MAX_DEVICES_PER_USER` (int, 1..100), default 20: devices one account may have; registering
    /// one more removes the least recently registered.
    public var maxDevicesPerUser = 20
    /// `KINDRED_NOTIFY_SESSION_SWEEP_MS` (int, 100..60000), default 1000: how often the devices of ended sessions
    /// (sign-out, sign-out everywhere, deactivation, password change) are removed.
    public var sessionSweepInterval: Duration = .seconds(1)
    /// `KINDRED_NOTIFY_WEB_PUSH_HOSTS` (comma-separated host names; a leading `.` matches any subdomain), default
    /// the browsers' push services: the hosts a Web Push endpoint may name. Anything else is refused at
    /// registration, so the service never posts to an address a member chose (internal networks included).
    public var webPushHosts: Set<String> = [
        "fcm.googleapis.com", "updates.push.services.mozilla.com", ".notify.windows.com", ".push.apple.com",
    ]
    /// `KINDRED_NOTIFY_WEB_PUSH_ALLOW_HTTP` (bool), default false: accept `http://` Web Push endpoints (local peers
    /// in development and tests only).
    public var webPushAllowHTTP = false
    /// APNs, configured when `KINDRED_NOTIFY_APNS_KEY_FILE` (the .p8 key) is set; then `_APNS_KEY_ID`,
    /// `_APNS_TEAM_ID` and `_APNS_TOPIC` (the app's bundle id) are required, and `_APNS_BASE_URL` (default
    /// Apple's production origin) and `_APNS_CA_FILE` (default the system's roots) optional. Unset: notifications
    /// to iOS devices are skipped.
    public var apns: APNsConfiguration?
    /// FCM, configured when `KINDRED_NOTIFY_FCM_SERVICE_ACCOUNT_FILE` is set; `_FCM_BASE_URL`, `_FCM_TOKEN_URL`
    /// (default the key file's `token_uri`) and `_FCM_CA_FILE` optional. Unset: notifications to Android devices
    /// are skipped.
    public var fcm: FCMConfiguration?
    /// Web Push, configured when `KINDRED_NOTIFY_WEB_PUSH_VAPID_KEY_FILE` (PKCS#8 PEM of a P-256 key) is set; then
    /// `_WEB_PUSH_SUBJECT` (the VAPID contact, `mailto:` or `https:`) is required and `_WEB_PUSH_CA_FILE` (default
    /// the system's roots) optional. Unset: notifications to browsers are skipped.
    public var webPush: WebPushConfiguration?
    /// `KINDRED_NOTIFY_SEND_POLL_MS` (int, 50..60000), default 500: how often the sender looks for due
    /// notifications when the queue was empty.
    public var sendPollInterval: Duration = .milliseconds(500)
    /// `KINDRED_NOTIFY_SEND_LEASE_MS` (int, 1000..600000), default 60000: how long notifications the sender claimed
    /// are its own. A sender that dies (kill -9) leaves them unsent or sent but not recorded; after the lease
    /// another (or the restarted one) sends them again, with the same notification id (at least once).
    public var sendLease: Duration = .seconds(60)
    /// `KINDRED_NOTIFY_SEND_CONCURRENCY` (int, 1..1000), default 64: most notifications the sender has in flight at
    /// once (each claimed only when a slot is free). It is also the most pushes a device may get twice after the
    /// sender dies (kill -9): those in flight, sent but not recorded yet, sent again after the lease with their id.
    public var sendConcurrency = 64
    /// `KINDRED_NOTIFY_MESSAGE_COLLAPSE_MS` (int, 0..60000), default 3000: how long a new message notification waits
    /// for more messages of its thread; they update it instead of queueing more (one push for a burst).
    public var messageCollapseWindow: Duration = .seconds(3)
    /// `KINDRED_NOTIFY_LIKES_DIGEST_MS` (int, 1000..604800000), default 14400000 (4 h): the least time between two
    /// likes digests to one member ("3 people liked you"); a digest's first like waits a minute (or this, if less)
    /// for others.
    public var likesDigestInterval: Duration = .seconds(4 * 3600)
    /// `KINDRED_NOTIFY_CHAT_ADDRESS` (host:port, or replicas: a comma-separated list), default none: chat, asked at each push for presence (no push for a
    /// message while the member has the app open), the unread total (the badge) and, when the member shows message
    /// text, the body. Unset: every due notification is pushed, without badge or message text.
    public var chatAddress: ServiceAddress?
    /// `KINDRED_NOTIFY_PROFILE_ADDRESS` (host:port, or replicas: a comma-separated list), default none: profile, whose cards name the other member
    /// (display name only, cached for a minute). Unset: the neutral word of the templates ("Someone").
    public var profileAddress: ServiceAddress?
    /// `KINDRED_NOTIFY_WEBHOOK_*`: webhook endpoints' transport, retries, secret grace and retention.
    public var webhooks = WebhookSettings()

    public init() {}

    public init(_ reader: EnvironmentReader) throws {
        self.endpoint = try NotifyServerDefinition.endpoint(reader)
        self.database = try NotifyServerDefinition.database(reader) ?? self.database
        self.auth = try AuthClientSettings(server: "notify", environment: reader)
        self.eventBus = try EventBusSettings(environment: reader)
        self.maxDevicesPerUser = try reader.int(
            "KINDRED_NOTIFY_MAX_DEVICES_PER_USER", default: self.maxDevicesPerUser, in: 1...100)
        self.sessionSweepInterval = try reader.milliseconds(
            "KINDRED_NOTIFY_SESSION_SWEEP_MS", default: self.sessionSweepInterval, in: 100...60_000)
        self.webPushHosts = Set(reader.list("KINDRED_NOTIFY_WEB_PUSH_HOSTS", default: self.webPushHosts).map { $0.lowercased() })
        self.webPushAllowHTTP = try reader.bool("KINDRED_NOTIFY_WEB_PUSH_ALLOW_HTTP", default: self.webPushAllowHTTP)
        self.apns = try Self.apns(reader)
        self.fcm = Self.fcm(reader)
        self.webPush = try Self.webPush(reader)
        self.sendPollInterval = try reader.milliseconds(
            "KINDRED_NOTIFY_SEND_POLL_MS", default: self.sendPollInterval, in: 50...60_000)
        self.sendLease = try reader.milliseconds(
            "KINDRED_NOTIFY_SEND_LEASE_MS", default: self.sendLease, in: 1000...600_000)
        self.sendConcurrency = try reader.int(
            "KINDRED_NOTIFY_SEND_CONCURRENCY", default: self.sendConcurrency, in: 1...1000)
        self.messageCollapseWindow = try reader.milliseconds(
            "KINDRED_NOTIFY_MESSAGE_COLLAPSE_MS", default: self.messageCollapseWindow, in: 0...60_000)
        self.likesDigestInterval = try reader.milliseconds(
            "KINDRED_NOTIFY_LIKES_DIGEST_MS", default: self.likesDigestInterval, in: 1_000...604_800_000)
        self.chatAddress = try reader.optionalServiceAddress("KINDRED_NOTIFY_CHAT_ADDRESS", default: nil)
        self.profileAddress = try reader.optionalServiceAddress("KINDRED_NOTIFY_PROFILE_ADDRESS", default: nil)
        self.webhooks = try WebhookSettings(reader)
    }

    private static func apns(_ reader: EnvironmentReader) throws -> APNsConfiguration? {
        guard let keyFile = reader.string("KINDRED_NOTIFY_APNS_KEY_FILE") else { return nil }
        func required(_ key: String) throws -> String {
            guard let value = reader.string(key), !value.isEmpty else {
                throw ConfigurationError(key: key, problem: "required when KINDRED_NOTIFY_APNS_KEY_FILE is set")
            }
            return value
        }
        var apns = APNsConfiguration(
            keyFile: keyFile, keyID: try required("KINDRED_NOTIFY_APNS_KEY_ID"),
            teamID: try required("KINDRED_NOTIFY_APNS_TEAM_ID"), topic: try required("KINDRED_NOTIFY_APNS_TOPIC"))
        apns.baseURL = reader.string("KINDRED_NOTIFY_APNS_BASE_URL") ?? apns.baseURL
        apns.trustRootsFile = reader.string("KINDRED_NOTIFY_APNS_CA_FILE")
        return apns
    }

    private static func webPush(_ reader: EnvironmentReader) throws -> WebPushConfiguration? {
        guard let keyFile = reader.string("KINDRED_NOTIFY_WEB_PUSH_VAPID_KEY_FILE") else { return nil }
        guard let subject = reader.string("KINDRED_NOTIFY_WEB_PUSH_SUBJECT"),
            subject.hasPrefix("mailto:") || subject.hasPrefix("https://")
        else {
            throw ConfigurationError(
                key: "KINDRED_NOTIFY_WEB_PUSH_SUBJECT",
                problem: "a mailto: or https: contact is required when KINDRED_NOTIFY_WEB_PUSH_VAPID_KEY_FILE is set")
        }
        var webPush = WebPushConfiguration(vapidKeyFile: keyFile, subject: subject)
        webPush.trustRootsFile = reader.string("KINDRED_NOTIFY_WEB_PUSH_CA_FILE")
        return webPush
    }

    private static func fcm(_ reader: EnvironmentReader) -> FCMConfiguration? {
        guard let account = reader.string("KINDRED_NOTIFY_FCM_SERVICE_ACCOUNT_FILE") else { return nil }
        var fcm = FCMConfiguration(serviceAccountFile: account)
        fcm.baseURL = reader.string("KINDRED_NOTIFY_FCM_BASE_URL") ?? fcm.baseURL
        fcm.tokenURL = reader.string("KINDRED_NOTIFY_FCM_TOKEN_URL")
        fcm.trustRootsFile = reader.string("KINDRED_NOTIFY_FCM_CA_FILE")
        return fcm
    }
}
