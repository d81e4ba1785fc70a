import KindredGRPC
import KindredProto
import KindredServiceKit

/// Every failure the profile service reports to callers: the kit's ``ServiceError``, with profile's fixed answers
/// below (rule checks name their own reasons, e.g. `ProfileError(.failedPrecondition, "BELOW_MINIMUM_AGE", …)`).
/// Messages are fixed texts: never SQL, coordinates or another user's data.
public typealias ProfileError = ServiceError

extension ServiceError {
    /// INVALID_ARGUMENT naming one field.
    static func invalid(_ field: String, _ reason: String, _ hint: String) -> ServiceError {
        ServiceError(violations: [Self.violation(field, reason, hint)])
    }

    /// INVALID_ARGUMENT naming every field that broke a rule.
    static func invalid(_ violations: [Kindred.Common.V1.FieldViolation]) -> ServiceError {
        ServiceError(violations: violations)
    }

    static let permissionDenied = ServiceError(.permissionDenied, "Not allowed for this caller")
    static let profileNotFound = ServiceError(.notFound, "PROFILE_NOT_FOUND", "No profile: create it first")
    static let communityNotFound = ServiceError(.notFound, "Unknown community")
    static let photoNotFound = ServiceError(.notFound, "Unknown photo")
    static let signUpClosed = ServiceError(
        .failedPrecondition, "SIGN_UP_CLOSED", "This community is not taking new members")
    static let notYetApplied = ServiceError(
        Code(.unavailable, reason: "NOT_YET_APPLIED"),
        "The change is recorded but not yet in effect everywhere; retry", retryAfter: .seconds(1))
    /// Discovery's card check cannot answer: a card is never shown unchecked.
    static let profilesUnavailable = ServiceError(
        .unavailable, "Profiles are unavailable right now; retry shortly", retryAfter: .seconds(1))
    static let versionMismatch = ServiceError(.aborted, "VERSION_MISMATCH", "The version changed; read it again")

    static func rateLimited(_ message: String, retryAfter: Duration) -> ServiceError {
        ServiceError(.rateLimited, message, retryAfter: retryAfter)
    }
}
