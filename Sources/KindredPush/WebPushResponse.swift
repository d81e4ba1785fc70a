/// What a Web Push service answered to one push (RFC 8030 §5, §8.3, §8.4; RFC 8292 §4.2), as an outcome.
struct WebPushResponse {
    let status: Int
    let retryAfter: String?

    /// 201 (or 200/202): accepted. 404 and 410: the subscription has expired or was removed. 429 and 5xx: later,
    /// after Retry-After if given. 413 (payload too large), 400, 401/403 (VAPID refused) and other answers are
    /// refused for good.
    var outcome: PushOutcome {
        switch self.status {
        case 200, 201, 202:
            return .delivered
        case 404, 410:
            return .targetGone
        case 429, 500...599:
            return .retryLater(after: RetryAfter.parse(self.retryAfter))
        case 413:
            return .rejected(reason: "Payload too large")
        case 401, 403:
            return .rejected(reason: "VAPID refused (HTTP \(self.status))")
        default:
            return .rejected(reason: "HTTP \(self.status)")
        }
    }
}
