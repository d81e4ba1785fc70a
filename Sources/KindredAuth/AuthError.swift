import KindredGRPC
import KindredGRPCServices
import KindredProto

/// Every failure the auth service reports to callers, and the ONE place that maps it to a gRPC status
/// and a `kindred.common.v1.ErrorDetail` in the `kindred-error-bin` trailer (built by `RPCError.detailed`,
/// which adds the request id). Handlers throw it; the runtime maps it. Messages are fixed texts:
/// never SQL, hashes, tokens or another user's data.
public struct AuthError: Error, RPCErrorConvertible, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable {
        fileprivate enum Base: Hashable, Sendable {
            case invalidArgument, invalidCredentials, unauthenticated, tokenReused, emailNotVerified
            case accountDeactivated, permissionDenied, usernameTaken, rateLimited, tokenInvalid
            case reauthenticationRequired, notFound, failedPrecondition, emailTaken, unavailable, signUpClosed
        }
        fileprivate let base: Base

        /// Request fields are invalid (see `violations`).
        public static let invalidArgument = Code(base: .invalidArgument)
        /// Unknown login or wrong password, indistinguishable.
        public static let invalidCredentials = Code(base: .invalidCredentials)
        /// No valid access or refresh token.
        public static let unauthenticated = Code(base: .unauthenticated)
        /// A spent refresh token was presented; its session has been revoked.
        public static let tokenReused = Code(base: .tokenReused)
        public static let emailNotVerified = Code(base: .emailNotVerified)
        public static let accountDeactivated = Code(base: .accountDeactivated)
        public static let permissionDenied = Code(base: .permissionDenied)
        /// Usernames are public, so this is the only ALREADY_EXISTS.
        public static let usernameTaken = Code(base: .usernameTaken)
        public static let rateLimited = Code(base: .rateLimited)
        /// One-time email token invalid, used or expired.
        public static let tokenInvalid = Code(base: .tokenInvalid)
        public static let reauthenticationRequired = Code(base: .reauthenticationRequired)
        public static let notFound = Code(base: .notFound)
        public static let failedPrecondition = Code(base: .failedPrecondition)
        public static let emailTaken = Code(base: .emailTaken)
        public static let unavailable = Code(base: .unavailable)
        /// The community takes no new members (`CommunitySettings.sign_up_open` is false).
        public static let signUpClosed = Code(base: .signUpClosed)
    }

    public var code: Code
    public var message: String
    public var violations: [Kindred.Common.V1.FieldViolation] = []
    /// How long the caller should wait before retrying (RATE_LIMITED), sent as `retry_after_ms`.
    public var retryAfter: Duration?

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    static func invalid(_ field: String, _ reason: String, _ hint: String) -> AuthError {
        var violation = Kindred.Common.V1.FieldViolation()
        violation.field = field
        violation.reason = reason
        violation.hint = hint
        var error = AuthError(.invalidArgument, "The request is invalid")
        error.violations = [violation]
        return error
    }

    static let signUpClosed = AuthError(.signUpClosed, "This community is not taking new members")

    static func rateLimited(retryAfter: Duration) -> AuthError {
        var error = AuthError(.rateLimited, "Too many requests; try again later")
        error.retryAfter = retryAfter
        return error
    }

    /// Field reasons that are also documented ErrorDetail reasons of their own.
    private static let topLevelReasons: Set<String> = ["PASSWORD_TOO_COMMON"]

    public var description: String { "AuthError(\(self.code.base): \(self.message))" }

    public var rpcError: RPCError {
        let (status, reason): (StatusCode, String) =
            switch self.code.base {
            case .invalidArgument:
                (
                    .invalidArgument,
                    self.violations.first.flatMap { Self.topLevelReasons.contains($0.reason) ? $0.reason : nil }
                        ?? "INVALID_ARGUMENT"
                )
            case .invalidCredentials: (.unauthenticated, "INVALID_CREDENTIALS")
            case .unauthenticated: (.unauthenticated, "UNAUTHENTICATED")
            case .tokenReused: (.unauthenticated, "TOKEN_REUSED")
            case .emailNotVerified: (.failedPrecondition, "EMAIL_NOT_VERIFIED")
            case .accountDeactivated: (.permissionDenied, "ACCOUNT_DEACTIVATED")
            case .permissionDenied: (.permissionDenied, "PERMISSION_DENIED")
            case .usernameTaken: (.alreadyExists, "USERNAME_TAKEN")
            case .rateLimited: (.resourceExhausted, "RATE_LIMITED")
            case .tokenInvalid: (.failedPrecondition, "TOKEN_EXPIRED")
            case .reauthenticationRequired: (.failedPrecondition, "REAUTHENTICATION_REQUIRED")
            case .notFound: (.notFound, "NOT_FOUND")
            case .failedPrecondition: (.failedPrecondition, "FAILED_PRECONDITION")
            case .emailTaken: (.failedPrecondition, "EMAIL_TAKEN")
            case .unavailable: (.unavailable, "UNAVAILABLE")
            case .signUpClosed: (.failedPrecondition, "SIGN_UP_CLOSED")
            }
        return RPCError.detailed(
            status,
            self.message,
            reason: reason,
            violations: self.violations,
            retryAfter: self.retryAfter
        )
    }
}
