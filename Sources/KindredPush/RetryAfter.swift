/// The `Retry-After` header (RFC 9110 §10.2.3) as the pause a provider asked for. Only the delay-seconds form is
/// read: APNs and Google send seconds; an HTTP-date gives nil (the caller's own backoff applies).
enum RetryAfter {
    /// Delays above a day are capped: a provider's hint is not a reason to hold a notification longer.
    static let maximum: Duration = .seconds(86_400)

    static func parse(_ value: String?) -> Duration? {
        guard let value, let seconds = Int(value.filter { !$0.isWhitespace }), seconds >= 0 else {
            return nil
        }
        return min(.seconds(seconds), Self.maximum)
    }
}
