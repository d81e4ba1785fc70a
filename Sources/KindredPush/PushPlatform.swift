/// The push services a device can be registered with.
public enum PushPlatform: String, Sendable, Hashable, CaseIterable {
    case apns
    case fcm
    case webPush
}
