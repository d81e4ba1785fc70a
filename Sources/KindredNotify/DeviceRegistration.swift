import Foundation
import KindredOpenSSL
import KindredProto

/// A device as a member registers it, checked field by field: what the store writes. Pure, so the rules are
/// table-tested without I/O (`DeviceRegistrationTests`).
struct DeviceRegistration: Sendable, Hashable {
    var platform: DevicePlatform
    /// APNs device token (lower-case hex), FCM registration token, or the Web Push endpoint.
    var token: String
    /// Web Push only.
    var p256dh: String?
    var authSecret: String?
    var appID: String
    var locale: String
    var timeZone: String
    var appVersion: String

    /// What a Web Push endpoint may be.
    struct EndpointRules: Sendable {
        /// Host names; one starting with "." matches that domain's subdomains.
        var hosts: Set<String>
        var allowHTTP: Bool
    }

    static let maxEndpointBytes = 1_024
    static let maxFCMTokenBytes = 4_096

    /// Checks a RegisterDevice request: INVALID_ARGUMENT naming the first bad field.
    static func validate(_ request: Kindred.Notify.V1.RegisterDeviceRequest, endpoints: EndpointRules) throws(NotifyError)
        -> DeviceRegistration
    {
        guard let platform = DevicePlatform(request.platform) else {
            throw .invalid("platform", "REQUIRED", "APNS, FCM or WEB_PUSH")
        }
        var registration = DeviceRegistration(
            platform: platform, token: "", p256dh: nil, authSecret: nil,
            appID: try Self.appID(request.appId), locale: try Self.locale(request.locale),
            timeZone: try Self.timeZone(request.timeZone, field: "time_zone"),
            appVersion: try Self.appVersion(request.appVersion))
        switch platform {
        case .apns:
            registration.token = try Self.apnsToken(request.token)
        case .fcm:
            registration.token = try Self.fcmToken(request.token)
        case .webPush:
            guard request.token.isEmpty else { throw .invalid("token", "NOT_ALLOWED", "Web Push uses web_push, not token") }
            let subscription = request.webPush ?? .init()
            registration.token = try Self.endpoint(subscription.endpoint, rules: endpoints, field: "web_push.endpoint")
            registration.p256dh = try Self.base64url(subscription.p256dh, bytes: 65, field: "web_push.p256dh") {
                $0.first == 0x04
            }
            registration.authSecret = try Self.base64url(subscription.auth, bytes: 16, field: "web_push.auth") { _ in true }
        }
        return registration
    }

    /// 64..200 hex digits (APNs tokens are 32 bytes today; longer ones are announced), stored lower-case.
    static func apnsToken(_ text: String) throws(NotifyError) -> String {
        guard !text.isEmpty else { throw .invalid("token", "REQUIRED", "the APNs device token in hex") }
        guard (64...200).contains(text.utf8.count), text.count % 2 == 0, text.utf8.allSatisfy(\.isHexDigit) else {
            throw .invalid("token", "MALFORMED", "an APNs device token is 64..200 hex digits")
        }
        return text.lowercased()
    }

    /// 1..4096 characters of [A-Za-z0-9_:.-] (FCM registration tokens).
    static func fcmToken(_ text: String) throws(NotifyError) -> String {
        guard !text.isEmpty else { throw .invalid("token", "REQUIRED", "the FCM registration token") }
        guard text.utf8.count <= Self.maxFCMTokenBytes,
            text.utf8.allSatisfy({ $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ":")
                || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") })
        else { throw .invalid("token", "MALFORMED", "an FCM token is 1..4096 characters of [A-Za-z0-9_:.-]") }
        return text
    }

    /// An https URL (http only where allowed) on an allowed host, without user info, at most 1024 bytes.
    static func endpoint(_ text: String, rules: EndpointRules, field: String) throws(NotifyError) -> String {
        guard !text.isEmpty else { throw .invalid(field, "REQUIRED", "the subscription's endpoint URL") }
        guard text.utf8.count <= Self.maxEndpointBytes, let components = URLComponents(string: text),
            let scheme = components.scheme?.lowercased(), let host = components.host?.lowercased(), !host.isEmpty,
            components.user == nil, components.password == nil, components.fragment == nil
        else { throw .invalid(field, "MALFORMED", "an absolute URL of at most 1024 bytes") }
        guard scheme == "https" || (scheme == "http" && rules.allowHTTP) else {
            throw .invalid(field, "MALFORMED", "the endpoint must use https")
        }
        let allowed = rules.hosts.contains { allowed in
            allowed.hasPrefix(".") ? host.hasSuffix(allowed) : host == allowed
        }
        guard allowed else { throw .invalid(field, "HOST_NOT_ALLOWED", "this push service is not accepted here") }
        return text
    }

    /// Base64url without padding (padding tolerated) of exactly `bytes` bytes that pass `check`.
    static func base64url(_ text: String, bytes: Int, field: String, check: ([UInt8]) -> Bool) throws(NotifyError)
        -> String
    {
        guard !text.isEmpty else { throw .invalid(field, "REQUIRED", "base64url of \(bytes) bytes") }
        var unpadded = Substring(text)
        while unpadded.hasSuffix("=") { unpadded = unpadded.dropLast() }
        guard let decoded = Base64URL.decode(unpadded), decoded.count == bytes, check(decoded) else {
            throw .invalid(field, "MALFORMED", "base64url of \(bytes) bytes")
        }
        return Base64URL.encode(decoded)
    }

    /// 1..255 characters of [A-Za-z0-9._-] (bundle ids, application ids).
    static func appID(_ text: String) throws(NotifyError) -> String {
        guard !text.isEmpty else { throw .invalid("app_id", "REQUIRED", "the app's bundle id or application id") }
        guard text.utf8.count <= 255,
            text.utf8.allSatisfy({ $0.isASCIIAlphanumeric || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_")
                || $0 == UInt8(ascii: "-") })
        else { throw .invalid("app_id", "MALFORMED", "1..255 characters of [A-Za-z0-9._-]") }
        return text
    }

    /// A BCP 47 tag: 0..35 characters of [A-Za-z0-9-] (empty = "en"); kept as given.
    static func locale(_ text: String) throws(NotifyError) -> String {
        guard !text.isEmpty else { return "en" }
        guard text.utf8.count <= 35, text.utf8.first?.isASCIIAlphanumeric == true,
            text.utf8.allSatisfy({ $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") })
        else { throw .invalid("locale", "MALFORMED", "a language tag such as en-GB") }
        return text.replacingOccurrences(of: "_", with: "-")
    }

    /// An IANA time zone name Foundation knows (empty = UTC).
    static func timeZone(_ text: String, field: String) throws(NotifyError) -> String {
        guard !text.isEmpty else { return "UTC" }
        guard text.utf8.count <= 64, TimeZone(identifier: text) != nil else {
            throw .invalid(field, "UNKNOWN_TIME_ZONE", "an IANA time zone such as Europe/Paris")
        }
        return text
    }

    /// 0..32 printable ASCII characters.
    static func appVersion(_ text: String) throws(NotifyError) -> String {
        guard text.utf8.count <= 32, text.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else {
            throw .invalid("app_version", "MALFORMED", "0..32 printable ASCII characters")
        }
        return text
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(self)
    }
    fileprivate var isASCIIAlphanumeric: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
    }
}
