/// Settings of the APNs provider (Apple's HTTP/2 provider API with token-based authentication).
public struct APNsConfiguration: Sendable {
    /// The provider API's origin. Default `https://api.push.apple.com` (production);
    /// `https://api.sandbox.push.apple.com` for development builds, or a local peer.
    public var baseURL: String = "https://api.push.apple.com"
    /// The `.p8` signing key from the developer account: PKCS#8 PEM of an EC P-256 key.
    public var keyFile: String
    /// The key's 10-character id (the JWT header's `kid`).
    public var keyID: String
    /// The developer team's id (the JWT's `iss`).
    public var teamID: String
    /// `apns-topic` for targets registered without one: the app's bundle id.
    public var topic: String
    /// PEM file of the CA that the server's certificate must chain to; nil for the system store (real APNs).
    public var trustRootsFile: String?
    /// HTTP/2 connections to APNs; pushes are multiplexed as concurrent streams on each, up to the stream limit
    /// Apple announces (SETTINGS_MAX_CONCURRENT_STREAMS). Default 1.
    public var connectionCount: Int = 1
    /// Time allowed for one push, from taking a stream to the answer. Default 10 s.
    public var requestTimeout: Duration = .seconds(10)
    /// How long one provider token is reused before a new one is signed. Apple refuses tokens older than an
    /// hour and refreshes more often than every 20 minutes; default 40 minutes.
    public var tokenRefreshInterval: Duration = .seconds(40 * 60)

    public init(keyFile: String, keyID: String, teamID: String, topic: String) {
        self.keyFile = keyFile
        self.keyID = keyID
        self.teamID = teamID
        self.topic = topic
    }
}
