import KindredProto
import KindredPush

/// A device's push service as notify stores it (`devices.platform`) and names it on the wire.
enum DevicePlatform: String, Sendable, Hashable, CaseIterable {
    case apns
    case fcm
    case webPush = "web_push"

    init?(_ wire: Kindred.Notify.V1.PushPlatform) {
        switch wire {
        case .apns: self = .apns
        case .fcm: self = .fcm
        case .webPush: self = .webPush
        case .unspecified, .unrecognized: return nil
        }
    }

    var wire: Kindred.Notify.V1.PushPlatform {
        switch self {
        case .apns: .apns
        case .fcm: .fcm
        case .webPush: .webPush
        }
    }

    /// The provider that reaches it.
    var push: PushPlatform {
        switch self {
        case .apns: .apns
        case .fcm: .fcm
        case .webPush: .webPush
        }
    }
}
