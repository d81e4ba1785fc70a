import KindredProto

/// A stored device (table `devices`), as the owner's answers show it.
struct DeviceRecord: Sendable, Hashable {
    var deviceID: String
    var platform: DevicePlatform
    var token: String
    var appID: String
    var locale: String
    var timeZone: String
    var appVersion: String
    var createdUnixMs: Int64
    var registeredUnixMs: Int64
    /// Web Push only: the subscription's keys (base64url), which the push is encrypted for.
    var p256dh: String? = nil
    var authSecret: String? = nil

    var wire: Kindred.Notify.V1.Device {
        var device = Kindred.Notify.V1.Device()
        device.deviceId = self.deviceID
        device.platform = self.platform.wire
        device.tokenHint = String(self.token.suffix(6))
        device.appId = self.appID
        device.locale = self.locale
        device.timeZone = self.timeZone
        device.appVersion = self.appVersion
        device.createdUnixMs = self.createdUnixMs
        device.registeredUnixMs = self.registeredUnixMs
        return device
    }
}
