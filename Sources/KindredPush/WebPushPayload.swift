/// The JSON a browser's service worker receives in its `push` event (after decryption): what it passes to
/// `showNotification` (title; body; tag, which replaces an earlier notification with the same tag) and the data
/// the page reads when the notification is clicked.
struct WebPushPayload: Encodable {
    let id: String
    let title: String
    let body: String
    let tag: String?
    let badge: Int?
    let data: [String: String]

    init(_ notification: PushNotification) {
        self.id = notification.id
        self.title = notification.title
        self.body = notification.body
        self.tag = notification.collapseKey
        self.badge = notification.badge
        self.data = notification.data
    }
}
