import KindredGRPC
import KindredProto
import KindredServiceKit

/// Every failure the chat service reports to callers: the kit's ``ServiceError`` with chat's codes below.
/// Messages are fixed texts: never SQL, never who blocked whom, never another user's data.
public typealias ChatError = ServiceError

extension ServiceError.Code {
    /// A client_message_id already used with other content.
    static let clientIDReused = Self(.alreadyExists, reason: "CLIENT_MESSAGE_ID_REUSED")
    /// A Subscribe stream whose buffer filled: the client resumes with its last token.
    static let subscriberTooSlow = Self(.unavailable, reason: "SUBSCRIBER_TOO_SLOW")
    /// A Subscribe stream ended because the server stops: the client resumes elsewhere.
    static let serverDraining = Self(.unavailable, reason: "SERVER_DRAINING")
}

extension ServiceError {
    /// INVALID_ARGUMENT naming one field (its reason is also the detail's reason).
    static func invalid(_ field: String, _ reason: String, _ hint: String) -> ServiceError {
        ServiceError(violations: [Self.violation(field, reason, hint)], code: Code(.invalidArgument, reason: reason))
    }

    /// Unknown thread, one the caller does not take part in, or one the policy hides (ended by an unmatch, a block
    /// either way or a deletion; hidden by a deactivation): the same answer.
    static let threadNotFound = ServiceError(.notFound, "No such thread")
    static let messageNotFound = ServiceError(.notFound, "No such message in this thread")

    static func rateLimited(_ message: String, retryAfter: Duration) -> ServiceError {
        ServiceError(.rateLimited, message, retryAfter: retryAfter)
    }
}
