#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What APNs answered to one push, as an outcome (Apple's "Handling notification responses from APNs").
struct APNsResponse {
    let status: Int
    let retryAfter: String?
    let body: [UInt8]

    /// The `reason` of the JSON error body, e.g. "BadDeviceToken"; "HTTP <status>" when there is none.
    var reason: String {
        struct ErrorBody: Decodable { let reason: String }
        let decoded = try? JSONDecoder().decode(ErrorBody.self, from: Data(self.body))
        return decoded?.reason ?? "HTTP \(self.status)"
    }

    /// 200: delivered. 410 (Unregistered, ExpiredToken) and 400 BadDeviceToken: the token is gone. 429 and 5xx
    /// (TooManyRequests, InternalServerError, ServiceUnavailable, Shutdown): later, after Retry-After if given.
    /// 403 ExpiredProviderToken: later (our token is re-signed first). Every other 4xx is refused for good.
    var outcome: PushOutcome {
        switch self.status {
        case 200:
            return .delivered
        case 410:
            return .targetGone
        case 429, 500...599:
            return .retryLater(after: RetryAfter.parse(self.retryAfter))
        default:
            let reason = self.reason
            switch reason {
            case "BadDeviceToken", "Unregistered": return .targetGone
            case "ExpiredProviderToken": return .retryLater(after: nil)
            default: return .rejected(reason: reason)
            }
        }
    }
}
