/// The body of FCM HTTP v1 `messages:send`: `{"message": {"token", "notification", "data", "android"}}`.
struct FCMMessage: Encodable {
    struct Message: Encodable {
        let token: String
        let notification: Notification
        let data: [String: String]
        let android: Android
    }

    struct Notification: Encodable {
        let title: String
        let body: String
    }

    struct Android: Encodable {
        let collapse_key: String?
        let priority: String
        let ttl: String?
        let notification: AndroidNotification
    }

    struct AndroidNotification: Encodable {
        let tag: String?
        let notification_count: Int?
    }

    let message: Message

    /// Keys FCM reserves in `data` (its docs: "from", "notification", "message_type", and any starting with
    /// "google" or "gcm"); a message carrying one is refused as INVALID_ARGUMENT, so they are dropped.
    static func isReserved(_ key: String) -> Bool {
        ["from", "notification", "message_type"].contains(key) || key.hasPrefix("google") || key.hasPrefix("gcm")
    }

    /// The message for one device; `ttlSeconds` is how long FCM may hold it (nil: FCM's default of four weeks).
    /// The notification id travels in `data` as `notification_id`, the app's de-duplication key.
    init(_ notification: PushNotification, registrationToken: String, ttlSeconds: Int64?) {
        var data = notification.data.filter { !Self.isReserved($0.key) }
        data["notification_id"] = notification.id
        self.message = Message(
            token: registrationToken,
            notification: Notification(title: notification.title, body: notification.body),
            data: data,
            android: Android(
                collapse_key: notification.collapseKey,
                priority: notification.priority == .high ? "HIGH" : "NORMAL",
                ttl: ttlSeconds.map { "\($0)s" },
                notification: AndroidNotification(tag: notification.collapseKey, notification_count: notification.badge)
            )
        )
    }
}
