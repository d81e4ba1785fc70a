import KindredGRPC
import KindredGRPCServices
import KindredProto

/// Every failure the chat service reports to callers, and the one place that maps it to a gRPC status and a
/// `kindred.common.v1.ErrorDetail` (built by `RPCError.detailed`, which adds the request id). Handlers throw it;
/// the runtime maps it. Messages are fixed texts: never SQL, never who blocked whom, never another user's data.
public struct ChatError: Error, RPCErrorConvertible, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable {
        fileprivate enum Base: Hashable, Sendable {
            case invalidArgument, unauthenticated, permissionDenied, notFound, clientIDReused
            case rateLimited, unavailable, subscriberTooSlow, serverDraining
        }
        fileprivate let base: Base

        /// Request fields are invalid (see `violations`).
        public static let invalidArgument = Code(base: .invalidArgument)
        public static let unauthenticated = Code(base: .unauthenticated)
        public static let permissionDenied = Code(base: .permissionDenied)
        /// Unknown thread or message, one the caller does not take part in, or one the policy hides (ended by an
        /// unmatch, a block either way or a deletion; hidden by a deactivation): the same answer.
        public static let notFound = Code(base: .notFound)
        /// A client_message_id already used with other content.
        public static let clientIDReused = Code(base: .clientIDReused)
        /// Hourly message limit or typing limit.
        public static let rateLimited = Code(base: .rateLimited)
        public static let unavailable = Code(base: .unavailable)
        /// A Subscribe stream whose buffer filled: the client resumes with its last token.
        public static let subscriberTooSlow = Code(base: .subscriberTooSlow)
        /// A Subscribe stream ended because the server stops: the client resumes elsewhere.
        public static let serverDraining = Code(base: .serverDraining)
    }

    public var code: Code
    public var message: String
    public var violations: [Kindred.Common.V1.FieldViolation] = []
    public var retryAfter: Duration?

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    static func invalid(_ field: String, _ reason: String, _ hint: String) -> ChatError {
        var error = ChatError(.invalidArgument, "The request is invalid")
        error.violations = [FieldViolationBuilder.make(field, reason, hint)]
        return error
    }

    static let threadNotFound = ChatError(.notFound, "No such thread")
    static let messageNotFound = ChatError(.notFound, "No such message in this thread")

    static func rateLimited(_ message: String, retryAfter: Duration) -> ChatError {
        var error = ChatError(.rateLimited, message)
        error.retryAfter = retryAfter
        return error
    }

    public var description: String { "ChatError(\(self.code.base): \(self.message))" }

    public var rpcError: RPCError {
        let (status, reason): (StatusCode, String) =
            switch self.code.base {
            case .invalidArgument: (.invalidArgument, self.violations.first?.reason ?? "INVALID_ARGUMENT")
            case .unauthenticated: (.unauthenticated, "UNAUTHENTICATED")
            case .permissionDenied: (.permissionDenied, "PERMISSION_DENIED")
            case .notFound: (.notFound, "NOT_FOUND")
            case .clientIDReused: (.alreadyExists, "CLIENT_MESSAGE_ID_REUSED")
            case .rateLimited: (.resourceExhausted, "RATE_LIMITED")
            case .unavailable: (.unavailable, "UNAVAILABLE")
            case .subscriberTooSlow: (.unavailable, "SUBSCRIBER_TOO_SLOW")
            case .serverDraining: (.unavailable, "SERVER_DRAINING")
            }
        return RPCError.detailed(status, self.message, reason: reason, violations: self.violations, retryAfter: self.retryAfter)
    }
}

enum FieldViolationBuilder {
    static func make(_ field: String, _ reason: String, _ hint: String) -> Kindred.Common.V1.FieldViolation {
        var violation = Kindred.Common.V1.FieldViolation()
        violation.field = field
        violation.reason = reason
        violation.hint = hint
        return violation
    }
}
