import KindredProto
import KindredServiceKit

/// Every failure the notify service reports to callers: the kit's ``ServiceError``. Messages are fixed texts:
/// never SQL, never a token, never another member's data. Who may call is the kit's ``ServiceAccess``, which
/// answers with its own statuses.
public typealias NotifyError = ServiceError

extension ServiceError {
    /// One invalid field: INVALID_ARGUMENT with a violation naming it (its reason is also the detail's reason).
    static func invalid(_ field: String, _ reason: String, _ hint: String) -> ServiceError {
        ServiceError(violations: [Self.violation(field, reason, hint)], code: Code(.invalidArgument, reason: reason))
    }
}

extension ServiceError {
    /// NOT_FOUND for an object of `kind` ("webhook endpoint"), with `reason` as the detail's reason.
    static func notFound(_ kind: String, reason: String) -> ServiceError {
        ServiceError(.notFound, reason, "No such \(kind)")
    }
}
