/// Settings of the FCM provider (Firebase Cloud Messaging HTTP v1 with a service account's OAuth 2.0 token).
public struct FCMConfiguration: Sendable {
    /// The service-account JSON key downloaded from the Firebase console (type, project_id, private_key_id,
    /// private_key, client_email, token_uri).
    public var serviceAccountFile: String
    /// The FCM API's origin. Default `https://fcm.googleapis.com`, or a local peer.
    public var baseURL: String = "https://fcm.googleapis.com"
    /// The OAuth 2.0 token endpoint; nil for the key file's `token_uri` (`https://oauth2.googleapis.com/token`).
    public var tokenURL: String?
    /// PEM file of the CA that the servers' certificates must chain to; nil for the system store (real FCM).
    public var trustRootsFile: String?
    /// HTTP/2 connections to the FCM API; sends are multiplexed as concurrent streams on each. Default 1.
    public var connectionCount: Int = 1
    /// Time allowed for one send or token request. Default 10 s.
    public var requestTimeout: Duration = .seconds(10)
    /// An access token is replaced this long before it expires (Google's last an hour). Default 5 minutes.
    public var tokenRefreshMargin: Duration = .seconds(300)

    public init(serviceAccountFile: String) {
        self.serviceAccountFile = serviceAccountFile
    }
}
