/// Settings of the Web Push provider (RFC 8030 push, RFC 8291 encryption, RFC 8292 VAPID).
public struct WebPushConfiguration: Sendable {
    /// The VAPID signing key: PKCS#8 (or SEC 1) PEM of an EC P-256 key, like an APNs `.p8`. Its public key is what
    /// browsers subscribe with (`applicationServerKey`): changing it orphans every existing subscription.
    public var vapidKeyFile: String
    /// The VAPID `sub` claim: how a push service reaches the operator, `mailto:` or `https:` (RFC 8292 §2.1).
    public var subject: String
    /// PEM file of the CA that push services' certificates must chain to; nil for the system store (real browsers'
    /// push services).
    public var trustRootsFile: String?
    /// HTTP/2 connections per push service origin. Default 1.
    public var connectionsPerOrigin: Int = 1
    /// Time allowed for one push, from taking a stream to the answer. Default 10 s.
    public var requestTimeout: Duration = .seconds(10)
    /// The `TTL` of a push without an expiry: how long the push service keeps it for an offline browser. Default
    /// 1 day.
    public var defaultTimeToLive: Duration = .seconds(86_400)
    /// How long a VAPID token is valid (RFC 8292: at most 24 hours). Default 12 hours.
    public var tokenLifetime: Duration = .seconds(12 * 3600)
    /// A token is replaced this long before it expires. Default 1 hour.
    public var tokenRefreshMargin: Duration = .seconds(3600)
    /// The plaintext is padded to a multiple of this many bytes, so the push service cannot tell texts apart by
    /// their length. Default 128.
    public var paddingBlock: Int = 128

    public init(vapidKeyFile: String, subject: String) {
        self.vapidKeyFile = vapidKeyFile
        self.subject = subject
    }
}
