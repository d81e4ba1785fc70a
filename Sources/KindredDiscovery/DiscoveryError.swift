import KindredGRPC
import KindredGRPCServices
import KindredProto

/// Every failure the discovery service reports to callers, and the ONE place that maps it to a gRPC status and
/// a `kindred.common.v1.ErrorDetail`. Messages are fixed texts: never another user's data.
public struct DiscoveryError: Error, RPCErrorConvertible, CustomStringConvertible, Sendable {
    public enum Code: Hashable, Sendable {
        case invalidArgument, unauthenticated, permissionDenied, notFound
        /// The viewer has no location yet.
        case locationRequired
        /// The viewer's own profile is not indexed (incomplete, paused, deactivated).
        case profileIncomplete
        /// A rebuild is already running.
        case rebuildRunning
        /// Too many calls for one viewer in a short time.
        case rateLimited
        case unavailable
    }

    public var code: Code
    public var message: String
    public var violations: [Kindred.Common.V1.FieldViolation] = []
    public var retryAfter: Duration?

    public init(_ code: Code, _ message: String, retryAfter: Duration? = nil) {
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    /// INVALID_ARGUMENT naming one field (`reason` a machine code, `hint` a fixed text, never the value).
    static func invalid(_ field: String, _ reason: String, _ hint: String) -> DiscoveryError {
        var error = DiscoveryError(.invalidArgument, "The request is invalid")
        error.violations = [Kindred.Common.V1.FieldViolation(field: field, reason: reason, hint: hint)]
        return error
    }

    public var description: String { "DiscoveryError(\(self.code): \(self.message))" }

    public var rpcError: RPCError {
        let (status, reason): (StatusCode, String) =
            switch self.code {
            case .invalidArgument: (.invalidArgument, self.violations.first?.reason ?? "INVALID_ARGUMENT")
            case .unauthenticated: (.unauthenticated, "UNAUTHENTICATED")
            case .permissionDenied: (.permissionDenied, "PERMISSION_DENIED")
            case .notFound: (.notFound, "NOT_FOUND")
            case .locationRequired: (.failedPrecondition, "LOCATION_REQUIRED")
            case .profileIncomplete: (.failedPrecondition, "PROFILE_INCOMPLETE")
            case .rebuildRunning: (.failedPrecondition, "REBUILD_RUNNING")
            case .rateLimited: (.resourceExhausted, "RATE_LIMITED")
            case .unavailable: (.unavailable, "UNAVAILABLE")
            }
        return RPCError.detailed(status, self.message, reason: reason, violations: self.violations, retryAfter: self.retryAfter)
    }
}
