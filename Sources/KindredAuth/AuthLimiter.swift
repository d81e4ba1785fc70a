import KindredGRPCServices
import NIOCore

/// The in-memory limits of one auth instance (services/auth/README.md, "Limits"): token buckets from the kit's
/// `TokenBucketLimiter` for request and mail quotas, and `SignInBackoff` for failed sign-ins. Keys hold no
/// secrets.
public final class AuthLimiter: Sendable {
    let buckets: TokenBucketLimiter
    let signIns: SignInBackoff

    /// `clock` is the monotonic time both refill and back off by; tests pass one they can move forward.
    public init(clock: @escaping @Sendable () -> NIODeadline = { .now() }) {
        // The default limit is never used: every auth call names its own.
        self.buckets = TokenBucketLimiter(.perWindow(60, seconds: 60), clock: clock)
        self.signIns = SignInBackoff(clock: clock)
    }
}
