#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// What a member sees on a locked screen, already rendered (template, locale, privacy rules applied).
public struct PushNotification: Sendable, Hashable {
    /// Stable across retries of the same notification: the APNs `apns-id`, the webhook id, the receiver's
    /// de-duplication key. A UUID in its canonical text form.
    public var id: String
    public var title: String
    public var body: String
    /// Notifications with the same key replace each other on the device (one per thread, one likes digest):
    /// `apns-collapse-id`, FCM's `collapse_key`/Android `tag`, Web Push `Topic`.
    public var collapseKey: String?
    /// The unread total to show on the app icon, when the platform has one.
    public var badge: Int?
    /// Small key-value payload the app reads when opened (kind, thread id, member id). Never personal data
    /// beyond what the text already shows.
    public var data: [String: String]
    /// After this instant the provider should drop the notification instead of delivering it late.
    public var expiresAt: Date?
    public var priority: PushPriority

    public init(
        id: String,
        title: String,
        body: String,
        collapseKey: String? = nil,
        badge: Int? = nil,
        data: [String: String] = [:],
        expiresAt: Date? = nil,
        priority: PushPriority = .high
    ) {
        self.id = id
        self.title = title
        self.body = body
        self.collapseKey = collapseKey
        self.badge = badge
        self.data = data
        self.expiresAt = expiresAt
        self.priority = priority
    }
}

/// How urgently the provider should wake the device.
public enum PushPriority: Sendable, Hashable {
    /// Delivered immediately (APNs priority 10, FCM/Web Push `high`).
    case high
    /// Delivered when convenient for the device's battery (APNs 5, FCM `normal`, Web Push `normal`).
    case normal
}
