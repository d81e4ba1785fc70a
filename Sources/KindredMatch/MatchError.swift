import KindredGRPC
import KindredGRPCServices
import KindredProto
import KindredServiceKit

/// Every failure the match service reports to callers, and the ONE place that maps it to a gRPC status and a
/// `kindred.common.v1.ErrorDetail` (reason, field violations, retry hint, request id). Messages are fixed texts:
/// never SQL or another user's data. In particular NOT_FOUND is the same answer for an unknown user, a user
/// who is not eligible or deactivated, and a user blocked either way (passes, blocks and reports stay private).
public struct MatchError: Error, RPCErrorConvertible, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable {
        fileprivate enum Base: Hashable, Sendable {
            case invalidArgument, unauthenticated, permissionDenied, notFound, alreadySwiped, undoNotAllowed
            case profileRequired, likeLimit, undoLimit, rateLimited, failedPrecondition, unavailable
        }
        fileprivate let base: Base
        public static let invalidArgument = Code(base: .invalidArgument)
        public static let unauthenticated = Code(base: .unauthenticated)
        public static let permissionDenied = Code(base: .permissionDenied)
        /// Unknown, invisible or blocked user, or an object that is not the caller's: all answered alike.
        public static let notFound = Code(base: .notFound)
        /// A different action on an already swiped person.
        public static let alreadySwiped = Code(base: .alreadySwiped)
        /// The last swipe is a like, the window passed, or undo is disabled.
        public static let undoNotAllowed = Code(base: .undoNotAllowed)
        /// The caller has no eligible profile in their community yet.
        public static let profileRequired = Code(base: .profileRequired)
        /// Daily like limit reached (retry hint: when it resets).
        public static let likeLimit = Code(base: .likeLimit)
        /// Daily undo limit reached (retry hint: when it resets).
        public static let undoLimit = Code(base: .undoLimit)
        /// Too many calls in a short time.
        public static let rateLimited = Code(base: .rateLimited)
        public static let failedPrecondition = Code(base: .failedPrecondition)
        public static let unavailable = Code(base: .unavailable)
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
    static func invalid(_ field: String, _ reason: String, _ hint: String) -> MatchError {
        var error = MatchError(.invalidArgument, "The request is invalid")
        error.violations = [Kindred.Common.V1.FieldViolation(field: field, reason: reason, hint: hint)]
        return error
    }

    /// INVALID_ARGUMENT for a text field that breaks its `TextRule`.
    init(_ violation: TextViolation) {
        self = .invalid(violation.field, violation.reason.code, violation.hint)
    }

    /// The one NOT_FOUND for people: unknown, invisible and blocked are indistinguishable.
    static let userNotFound = MatchError(.notFound, "No such user")

    public var description: String { "MatchError(\(self.code.base): \(self.message))" }

    public var rpcError: RPCError {
        let (status, reason): (StatusCode, String) =
            switch self.code.base {
            case .invalidArgument: (.invalidArgument, "INVALID_ARGUMENT")
            case .unauthenticated: (.unauthenticated, "UNAUTHENTICATED")
            case .permissionDenied: (.permissionDenied, "PERMISSION_DENIED")
            case .notFound: (.notFound, "NOT_FOUND")
            case .alreadySwiped: (.failedPrecondition, "ALREADY_SWIPED")
            case .undoNotAllowed: (.failedPrecondition, "UNDO_NOT_ALLOWED")
            case .profileRequired: (.failedPrecondition, "PROFILE_INCOMPLETE")
            case .likeLimit: (.resourceExhausted, "LIKE_LIMIT_REACHED")
            case .undoLimit: (.resourceExhausted, "UNDO_LIMIT_REACHED")
            case .rateLimited: (.resourceExhausted, "RATE_LIMITED")
            case .failedPrecondition: (.failedPrecondition, "FAILED_PRECONDITION")
            case .unavailable: (.unavailable, "UNAVAILABLE")
            }
        return RPCError.detailed(status, self.message, reason: reason, violations: self.violations, retryAfter: self.retryAfter)
    }
}
