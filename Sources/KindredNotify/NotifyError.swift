import KindredGRPC
import KindredGRPCServices
import KindredProto

/// Every failure the notify service reports to callers, and the one place that maps it to a gRPC status and a
/// `kindred.common.v1.ErrorDetail` (built by `RPCError.detailed`, which adds the request id). Handlers throw it;
/// the runtime maps it. Messages are fixed texts: never SQL, never a token, never another member's data. Who may
/// call is the kit's ``ServiceAccess``, which answers with its own statuses.
public struct NotifyError: Error, RPCErrorConvertible, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable {
        fileprivate enum Base: Hashable, Sendable {
            case invalidArgument
        }
        fileprivate let base: Base

        /// Request fields are invalid (see `violations`).
        public static let invalidArgument = Code(base: .invalidArgument)
    }

    public var code: Code
    public var message: String
    public var violations: [Kindred.Common.V1.FieldViolation] = []

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// One invalid field: INVALID_ARGUMENT with a violation naming it.
    static func invalid(_ field: String, _ reason: String, _ hint: String) -> NotifyError {
        var error = NotifyError(.invalidArgument, "The request is invalid")
        var violation = Kindred.Common.V1.FieldViolation()
        violation.field = field
        violation.reason = reason
        violation.hint = hint
        error.violations = [violation]
        return error
    }

    public var description: String { "NotifyError(\(self.code.base): \(self.message))" }

    public var rpcError: RPCError {
        let (status, reason): (StatusCode, String) =
            switch self.code.base {
            case .invalidArgument: (.invalidArgument, self.violations.first?.reason ?? "INVALID_ARGUMENT")
            }
        return RPCError.detailed(status, self.message, reason: reason, violations: self.violations)
    }
}
