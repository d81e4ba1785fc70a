import KindredGRPC
import KindredGRPCServices
import KindredProto

/// Every failure a Kindred service reports to callers, and the one place that maps it to a gRPC status and a
/// `kindred.common.v1.ErrorDetail` in the `kindred-error-bin` trailer (built by `RPCError.detailed`, which adds the
/// request id). Handlers throw it; the runtime maps it. Messages are fixed texts: never SQL, hashes, tokens,
/// coordinates or another user's data.
///
/// A service names its own codes in an extension of ``Code`` (`static let alreadySwiped = Code(.failedPrecondition,
/// reason: "ALREADY_SWIPED")`), so the codes a service answers with are listed in one file of that service, and
/// `<Service>Error` is this type under the service's name.
public struct ServiceError: Error, RPCErrorConvertible, CustomStringConvertible, Sendable, Equatable {
    /// A gRPC status and the ErrorDetail reason that says which case of it this is. Codes can be added anywhere.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The gRPC status code.
        public let status: StatusCode
        /// The ErrorDetail reason, e.g. "NOT_FOUND", "BELOW_MINIMUM_AGE".
        public let reason: String

        public init(_ status: StatusCode, reason: String) {
            self.status = status
            self.reason = reason
        }

        public var description: String { self.reason }

        /// Request fields are invalid (see `violations`).
        public static let invalidArgument = Code(.invalidArgument, reason: "INVALID_ARGUMENT")
        public static let unauthenticated = Code(.unauthenticated, reason: "UNAUTHENTICATED")
        public static let permissionDenied = Code(.permissionDenied, reason: "PERMISSION_DENIED")
        public static let notFound = Code(.notFound, reason: "NOT_FOUND")
        public static let failedPrecondition = Code(.failedPrecondition, reason: "FAILED_PRECONDITION")
        /// Too many calls in a short time (retry hint: when to try again).
        public static let rateLimited = Code(.resourceExhausted, reason: "RATE_LIMITED")
        public static let unavailable = Code(.unavailable, reason: "UNAVAILABLE")
    }

    public var code: Code
    public var message: String
    /// Per-field problems for INVALID_ARGUMENT.
    public var violations: [Kindred.Common.V1.FieldViolation] = []
    /// How long the caller should wait before retrying, sent as `retry_after_ms`.
    public var retryAfter: Duration?

    public init(_ code: Code, _ message: String, retryAfter: Duration? = nil) {
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    /// A code made on the spot: `status` with the ErrorDetail `reason`.
    public init(_ status: StatusCode, _ reason: String, _ message: String) {
        self.init(Code(status, reason: reason), message)
    }

    /// INVALID_ARGUMENT naming every field that broke a rule (`code` decides the detail's reason; default
    /// INVALID_ARGUMENT).
    public init(violations: [Kindred.Common.V1.FieldViolation], code: Code = .invalidArgument) {
        self.init(code, "The request is invalid")
        self.violations = violations
    }

    /// One field's problem: `reason` a machine code, `hint` a fixed text, never the value.
    public static func violation(_ field: String, _ reason: String, _ hint: String)
        -> Kindred.Common.V1.FieldViolation
    {
        var violation = Kindred.Common.V1.FieldViolation()
        violation.field = field
        violation.reason = reason
        violation.hint = hint
        return violation
    }

    public var description: String { "ServiceError(\(self.code.reason): \(self.message))" }

    public var rpcError: RPCError {
        RPCError.detailed(
            self.code.status, self.message, reason: self.code.reason, violations: self.violations,
            retryAfter: self.retryAfter)
    }
}
