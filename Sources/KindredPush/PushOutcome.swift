/// How one attempt to send a notification ended.
public enum PushOutcome: Sendable, Hashable {
    /// The provider accepted it.
    case delivered
    /// The provider says the token or subscription no longer exists (APNs 410 Unregistered, FCM UNREGISTERED,
    /// Web Push 404/410): the device is removed and nothing is retried.
    case targetGone
    /// Worth trying again later: a 429 or 5xx, a timeout, a connection that failed. `after` is the provider's
    /// Retry-After when it gave one; the caller slows this provider down, not the others.
    case retryLater(after: Duration?)
    /// The provider refused this notification for good (a malformed payload, a wrong topic): retrying cannot
    /// help. `reason` is the provider's own word for it, for logs.
    case rejected(reason: String)
}
