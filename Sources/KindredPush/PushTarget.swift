/// Where one device is reached.
public enum PushTarget: Sendable, Hashable {
    /// An APNs device token (hex) for the app with bundle id `topic`.
    case apns(deviceToken: String, topic: String)
    /// An FCM registration token.
    case fcm(registrationToken: String)
    /// A browser's push subscription (RFC 8030 endpoint; RFC 8291 `p256dh` public key and `auth` secret, both
    /// base64url without padding, as the browser's PushSubscription.toJSON() gives them).
    case webPush(endpoint: String, p256dh: String, auth: String)
}
