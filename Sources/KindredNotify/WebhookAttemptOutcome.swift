/// How one attempt at a webhook delivery ended, from the endpoint's answer, and what follows from it:
/// 2xx delivered; 410 gone (the endpoint is disabled, the delivery failed); 429 slow down (the endpoint alone is
/// paused for its Retry-After, then retried); anything else, or no answer in time, retried on the schedule.
/// Redirects are not followed: a 3xx is a failed attempt like any other.
enum WebhookAttemptOutcome: Equatable {
    case delivered
    case gone
    case slowDown(retryAfter: Duration?)
    case failed(error: String)

    init(status: Int, retryAfter: String?) {
        switch status {
        case 200..<300: self = .delivered
        case 410: self = .gone
        case 429: self = .slowDown(retryAfter: Self.seconds(retryAfter))
        default: self = .failed(error: "HTTP \(status)")
        }
    }

    /// Retry-After's delay-seconds form (RFC 9110 §10.2.3), at most a day; an HTTP-date gives nil (the schedule's
    /// backoff applies).
    static func seconds(_ value: String?) -> Duration? {
        guard let value, let seconds = Int(value.filter { !$0.isWhitespace }), seconds >= 0 else { return nil }
        return .seconds(min(seconds, 86_400))
    }
}
