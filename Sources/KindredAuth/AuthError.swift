import KindredGRPC
import KindredGRPCServices
import KindredProto
import KindredServiceKit

/// Every failure the auth service reports to callers: the kit's ``ServiceError`` with auth's codes below.
/// Messages are fixed texts: never SQL, hashes, tokens or another user's data.
public typealias AuthError = ServiceError

extension ServiceError.Code {
    /// Unknown login or wrong password, indistinguishable.
    static let invalidCredentials = Self(.unauthenticated, reason: "INVALID_CREDENTIALS")
    /// A spent refresh token was presented; its session has been revoked.
    static let tokenReused = Self(.unauthenticated, reason: "TOKEN_REUSED")
    static let emailNotVerified = Self(.failedPrecondition, reason: "EMAIL_NOT_VERIFIED")
    static let accountDeactivated = Self(.permissionDenied, reason: "ACCOUNT_DEACTIVATED")
    /// Usernames are public, so this is the only ALREADY_EXISTS.
    static let usernameTaken = Self(.alreadyExists, reason: "USERNAME_TAKEN")
    /// One-time email token invalid, used or expired.
    static let tokenInvalid = Self(.failedPrecondition, reason: "TOKEN_EXPIRED")
    static let reauthenticationRequired = Self(.failedPrecondition, reason: "REAUTHENTICATION_REQUIRED")
    static let emailTaken = Self(.failedPrecondition, reason: "EMAIL_TAKEN")
    /// The community takes no new members (`CommunitySettings.sign_up_open` is false).
    static let signUpClosed = Self(.failedPrecondition, reason: "SIGN_UP_CLOSED")
}

extension ServiceError {
    /// Field reasons that are also documented ErrorDetail reasons of their own.
    private static let topLevelReasons: Set<String> = ["PASSWORD_TOO_COMMON"]

    /// INVALID_ARGUMENT naming one field; the detail's reason is INVALID_ARGUMENT unless the field's reason is one
    /// of its own (PASSWORD_TOO_COMMON).
    static func invalid(_ field: String, _ reason: String, _ hint: String) -> ServiceError {
        ServiceError(
            violations: [Self.violation(field, reason, hint)],
            code: Self.topLevelReasons.contains(reason) ? Code(.invalidArgument, reason: reason) : .invalidArgument)
    }

    static let signUpClosed = ServiceError(.signUpClosed, "This community is not taking new members")

    static func rateLimited(retryAfter: Duration) -> ServiceError {
        ServiceError(.rateLimited, "Too many requests; try again later", retryAfter: retryAfter)
    }
}
