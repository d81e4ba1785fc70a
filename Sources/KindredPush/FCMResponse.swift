#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What FCM answered to one send, as an outcome (Firebase's "FCM HTTP v1 error codes": the HTTP status, the
/// error's `status` and the `errorCode` of its FcmError detail).
struct FCMResponse {
    let status: Int
    let retryAfter: String?
    let body: [UInt8]

    private struct ErrorBody: Decodable {
        struct Detail: Decodable {
            let errorCode: String?
        }
        struct Inner: Decodable {
            let status: String?
            let details: [Detail]?
        }
        let error: Inner
    }

    /// The FcmError code (UNREGISTERED, INVALID_ARGUMENT, QUOTA_EXCEEDED, ...), else the error's status, else
    /// "HTTP <status>".
    var reason: String {
        let decoded = try? JSONDecoder().decode(ErrorBody.self, from: Data(self.body))
        let code = decoded?.error.details?.compactMap(\.errorCode).first
        return code ?? decoded?.error.status ?? "HTTP \(self.status)"
    }

    /// 200: delivered. UNREGISTERED or 404: the token is gone. 429 (QUOTA_EXCEEDED) and 5xx (UNAVAILABLE,
    /// INTERNAL): later, after Retry-After if given. 401: later (a new access token is fetched first). Other
    /// answers (INVALID_ARGUMENT, SENDER_ID_MISMATCH, THIRD_PARTY_AUTH_ERROR) are refused for good.
    var outcome: PushOutcome {
        switch self.status {
        case 200:
            return .delivered
        case 404:
            return .targetGone
        case 429, 500...599:
            return .retryLater(after: RetryAfter.parse(self.retryAfter))
        case 401:
            return .retryLater(after: nil)
        default:
            let reason = self.reason
            return reason == "UNREGISTERED" ? .targetGone : .rejected(reason: reason)
        }
    }
}
