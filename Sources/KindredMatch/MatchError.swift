import KindredGRPC
import KindredProto
import KindredServiceKit

/// Every failure the match service reports to callers: the kit's ``ServiceError`` with match's codes below.
/// Messages are fixed texts: never SQL or another user's data. In particular NOT_FOUND is the same answer for an
/// unknown user, a user who is not eligible or deactivated, and a user blocked either way (passes, blocks and
/// reports stay private).
public typealias MatchError = ServiceError

extension ServiceError.Code {
    /// A different action on an already swiped person.
    static let alreadySwiped = Self(.failedPrecondition, reason: "ALREADY_SWIPED")
    /// The last swipe is a like, the window passed, or undo is disabled.
    static let undoNotAllowed = Self(.failedPrecondition, reason: "UNDO_NOT_ALLOWED")
    /// The caller has no eligible profile in their community yet.
    static let profileRequired = Self(.failedPrecondition, reason: "PROFILE_INCOMPLETE")
    /// StartActivity in a mutual community (nobody follows anyone there).
    static let notAFollowCommunity = Self(.failedPrecondition, reason: "NOT_A_FOLLOW_COMMUNITY")
    /// Daily like limit reached (retry hint: when it resets).
    static let likeLimit = Self(.resourceExhausted, reason: "LIKE_LIMIT_REACHED")
    /// Daily undo limit reached (retry hint: when it resets).
    static let undoLimit = Self(.resourceExhausted, reason: "UNDO_LIMIT_REACHED")
}

extension ServiceError {
    /// INVALID_ARGUMENT naming one field (`reason` a machine code, `hint` a fixed text, never the value).
    static func invalid(_ field: String, _ reason: String, _ hint: String) -> ServiceError {
        ServiceError(violations: [Self.violation(field, reason, hint)])
    }

    /// INVALID_ARGUMENT for a text field that breaks its `TextRule`.
    init(_ violation: TextViolation) {
        self = .invalid(violation.field, violation.reason.code, violation.hint)
    }

    /// The one NOT_FOUND for people: unknown, invisible and blocked are indistinguishable.
    static let userNotFound = ServiceError(.notFound, "No such user")

    /// Discovery's candidate check cannot answer: a swipe is never accepted unchecked.
    static let swipingUnavailable = ServiceError(
        .unavailable, "Swiping is unavailable right now; retry shortly", retryAfter: .seconds(1))
}
