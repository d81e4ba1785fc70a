import KindredGRPC
import KindredGRPCServices
import KindredProto

/// Every failure the profile service reports to callers, and the ONE place that maps it to a gRPC status and a
/// `kindred.common.v1.ErrorDetail` (built by `RPCError.detailed`, which adds the request id). Handlers throw it;
/// the runtime maps it. Messages are fixed texts: never SQL, coordinates or another user's data.
public struct ProfileError: Error, RPCErrorConvertible, CustomStringConvertible, Sendable, Equatable {
    /// The gRPC status code.
    public var status: StatusCode
    /// The ErrorDetail reason, e.g. "IMMUTABLE_FIELD", "BELOW_MINIMUM_AGE".
    public var reason: String
    public var message: String
    public var violations: [Kindred.Common.V1.FieldViolation] = []
    /// RESOURCE_EXHAUSTED and UNAVAILABLE: how long to wait, sent as `retry_after_ms`.
    public var retryAfter: Duration?

    public init(_ status: StatusCode, _ reason: String, _ message: String) {
        self.status = status
        self.reason = reason
        self.message = message
    }

    /// INVALID_ARGUMENT naming one field.
    static func invalid(_ field: String, _ reason: String, _ hint: String) -> ProfileError {
        var error = ProfileError(.invalidArgument, "INVALID_ARGUMENT", "The request is invalid")
        error.violations = [Self.violation(field, reason, hint)]
        return error
    }

    /// INVALID_ARGUMENT naming every field that broke a rule.
    static func invalid(_ violations: [Kindred.Common.V1.FieldViolation]) -> ProfileError {
        var error = ProfileError(.invalidArgument, "INVALID_ARGUMENT", "The request is invalid")
        error.violations = violations
        return error
    }

    static func violation(_ field: String, _ reason: String, _ hint: String) -> Kindred.Common.V1.FieldViolation {
        .with {
            $0.field = field
            $0.reason = reason
            $0.hint = hint
        }
    }

    static let permissionDenied = ProfileError(.permissionDenied, "PERMISSION_DENIED", "Not allowed for this caller")
    static let profileNotFound = ProfileError(.notFound, "PROFILE_NOT_FOUND", "No profile: create it first")
    static let communityNotFound = ProfileError(.notFound, "NOT_FOUND", "Unknown community")
    static let photoNotFound = ProfileError(.notFound, "NOT_FOUND", "Unknown photo")
    static let signUpClosed = ProfileError(
        .failedPrecondition, "SIGN_UP_CLOSED", "This community is not taking new members")
    static let notYetApplied: ProfileError = {
        var error = ProfileError(
            .unavailable, "NOT_YET_APPLIED", "The change is recorded but not yet in effect everywhere; retry")
        error.retryAfter = .seconds(1)
        return error
    }()
    static let versionMismatch = ProfileError(.aborted, "VERSION_MISMATCH", "The version changed; read it again")

    static func rateLimited(_ message: String, retryAfter: Duration) -> ProfileError {
        var error = ProfileError(.resourceExhausted, "RATE_LIMITED", message)
        error.retryAfter = retryAfter
        return error
    }

    public var description: String { "ProfileError(\(self.reason): \(self.message))" }

    public var rpcError: RPCError {
        RPCError.detailed(
            self.status,
            self.message,
            reason: self.reason,
            violations: self.violations,
            retryAfter: self.retryAfter
        )
    }
}
