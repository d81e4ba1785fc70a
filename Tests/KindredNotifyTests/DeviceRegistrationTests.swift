import KindredProto
import Testing

@testable import KindredNotify

@Suite("Device registration rules")
struct DeviceRegistrationTests {
    static let rules = DeviceRegistration.EndpointRules(hosts: ["fcm.googleapis.com", ".push.apple.com"], allowHTTP: false)
    static let p256dh = "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM"
    static let auth = "tBHItJI5svbpez7KI4CCXg"

    static func request(_ platform: Notify.PushPlatform, token: String = "", endpoint: String? = nil)
        -> Notify.RegisterDeviceRequest
    {
        var request = Notify.RegisterDeviceRequest()
        request.platform = platform
        request.token = token
        request.appId = "com.example.kindred"
        if let endpoint {
            request.webPush = .with {
                $0.endpoint = endpoint
                $0.p256dh = Self.p256dh
                $0.auth = Self.auth
            }
        }
        return request
    }

    @Test func acceptsEachPlatform() throws {
        let apns = try DeviceRegistration.validate(Self.request(.apns, token: String(repeating: "AB", count: 32)), endpoints: Self.rules)
        #expect(apns.token == String(repeating: "ab", count: 32))
        #expect(apns.locale == "en" && apns.timeZone == "UTC")
        let fcm = try DeviceRegistration.validate(Self.request(.fcm, token: "abc:DEF_12-3.x"), endpoints: Self.rules)
        #expect(fcm.platform == .fcm)
        let web = try DeviceRegistration.validate(
            Self.request(.webPush, endpoint: "https://fcm.googleapis.com/fcm/send/xyz"), endpoints: Self.rules)
        #expect(web.p256dh == Self.p256dh && web.authSecret == Self.auth)
        var padded = Self.request(.webPush, endpoint: "https://fcm.googleapis.com/fcm/send/xyz")
        padded.webPush?.p256dh = Self.p256dh + "="  // 65 bytes: one padding character, tolerated and dropped
        #expect(try DeviceRegistration.validate(padded, endpoints: Self.rules).p256dh == Self.p256dh)
        let apple = try DeviceRegistration.validate(
            Self.request(.webPush, endpoint: "https://web.push.apple.com/QGx"), endpoints: Self.rules)
        #expect(apple.token == "https://web.push.apple.com/QGx")
    }

    @Test(arguments: [
        (Notify.PushPlatform.unspecified, "", nil, "platform", "REQUIRED"),
        (.apns, "", nil, "token", "REQUIRED"),
        (.apns, "abc", nil, "token", "MALFORMED"),
        (.apns, String(repeating: "zz", count: 32), nil, "token", "MALFORMED"),
        (.fcm, "has space", nil, "token", "MALFORMED"),
        (.fcm, String(repeating: "a", count: 4097), nil, "token", "MALFORMED"),
        (.webPush, "", "http://fcm.googleapis.com/x", "web_push.endpoint", "MALFORMED"),
        (.webPush, "", "https://169.254.169.254/latest", "web_push.endpoint", "HOST_NOT_ALLOWED"),
        (.webPush, "", "https://evilpush.apple.com.attacker.example/x", "web_push.endpoint", "HOST_NOT_ALLOWED"),
        (.webPush, "", "https://user:pw@fcm.googleapis.com/x", "web_push.endpoint", "MALFORMED"),
        (.webPush, "", "", "web_push.endpoint", "REQUIRED"),
        (.webPush, "sometoken", "https://fcm.googleapis.com/x", "token", "NOT_ALLOWED"),
    ] as [(Notify.PushPlatform, String, String?, String, String)])
    func refuses(platform: Notify.PushPlatform, token: String, endpoint: String?, field: String, reason: String) {
        var request = Self.request(platform, token: token, endpoint: endpoint)
        if endpoint == "" { request.webPush = nil }
        do {
            _ = try DeviceRegistration.validate(request, endpoints: Self.rules)
            Issue.record("accepted \(platform) \(token) \(endpoint ?? "-")")
        } catch {
            #expect(error.violations.first?.field == field)
            #expect(error.violations.first?.reason == reason)
        }
    }

    @Test func refusesBadKeysAndFields() {
        var request = Self.request(.webPush, endpoint: "https://fcm.googleapis.com/x")
        request.webPush?.p256dh = String(Self.p256dh.dropLast(2))
        #expect(Self.field(request) == "web_push.p256dh")
        request = Self.request(.webPush, endpoint: "https://fcm.googleapis.com/x")
        request.webPush?.auth = "not base64!"
        #expect(Self.field(request) == "web_push.auth")
        request = Self.request(.fcm, token: "t")
        request.timeZone = "Mars/Olympus"
        #expect(Self.field(request) == "time_zone")
        request = Self.request(.fcm, token: "t")
        request.appId = ""
        #expect(Self.field(request) == "app_id")
        request = Self.request(.fcm, token: "t")
        request.locale = "en GB"
        #expect(Self.field(request) == "locale")
        request = Self.request(.fcm, token: "t")
        request.appVersion = "1.0\u{7}"
        #expect(Self.field(request) == "app_version")
    }

    @Test func httpEndpointsOnlyWhereAllowed() throws {
        let local = DeviceRegistration.EndpointRules(hosts: ["127.0.0.1"], allowHTTP: true)
        let registration = try DeviceRegistration.validate(
            Self.request(.webPush, endpoint: "http://127.0.0.1:8080/push/1"), endpoints: local)
        #expect(registration.token == "http://127.0.0.1:8080/push/1")
    }

    static func field(_ request: Notify.RegisterDeviceRequest) -> String? {
        do {
            _ = try DeviceRegistration.validate(request, endpoints: Self.rules)
            return nil
        } catch { return error.violations.first?.field }
    }
}
