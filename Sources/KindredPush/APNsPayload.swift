/// The JSON body of an alert push: `{"aps":{"alert":{"title","body"},"badge","sound","thread-id"}, ...data}`.
/// The app's data keys sit beside `aps` (a data key named `aps` is dropped: the dictionary is Apple's).
struct APNsPayload: Encodable {
    let notification: PushNotification

    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { self.stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    private struct APS: Encodable {
        struct Alert: Encodable {
            let title: String
            let body: String
        }
        let alert: Alert
        let badge: Int?
        let sound = "default"
        let threadID: String?

        enum CodingKeys: String, CodingKey {
            case alert, badge, sound
            case threadID = "thread-id"
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        let notification = self.notification
        try container.encode(
            APS(
                alert: .init(title: notification.title, body: notification.body),
                badge: notification.badge,
                threadID: notification.collapseKey
            ),
            forKey: Key("aps")
        )
        for (name, value) in notification.data where name != "aps" {
            try container.encode(value, forKey: Key(name))
        }
    }
}
