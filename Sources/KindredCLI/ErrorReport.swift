import KindredGRPC
import KindredGRPCServices
import KindredProto

/// What `kindred` prints to stderr for a failed command, and the exit status. The one place that turns
/// errors (gRPC statuses with their `kindred-error-bin` detail, local errors) into text for people.
///
/// ```
/// error: The request is invalid [INVALID_ARGUMENT]
///   password: TOO_SHORT (at least 8 characters)
/// ```
public struct ErrorReport: Hashable, Sendable {
    public var lines: [String]
    public var exitStatus: ExitStatus

    public init(lines: [String], exitStatus: ExitStatus) {
        self.lines = lines
        self.exitStatus = exitStatus
    }

    /// The report for `error`, raised by a call to `target` that had `timeout`.
    public init(_ error: any Error, target: GatewayTarget, timeout: Duration) {
        switch error {
        case let error as CLIError:
            self.init(lines: ["error: \(error)"], exitStatus: error.exitStatus)
        case let error as RPCError:
            self.init(error, target: target, timeout: timeout)
        default:
            self.init(lines: ["error: \(error)"], exitStatus: .serverError)
        }
    }

    public init(_ error: RPCError, target: GatewayTarget, timeout: Duration) {
        let detail = error.errorDetail
        let reason = detail.map { $0.reason.isEmpty ? "" : " [\($0.reason)]" } ?? ""
        var lines = ["error: \(Self.summary(error, target: target, timeout: timeout))\(reason)"]
        for violation in detail?.fieldViolations ?? [] {
            let hint = violation.hint.isEmpty ? "" : " (\(violation.hint))"
            lines.append("  \(violation.field.isEmpty ? "request" : violation.field): \(violation.reason)\(hint)")
        }
        if let detail, detail.retryAfterMs > 0 {
            lines.append("  retry after \(Self.seconds(milliseconds: detail.retryAfterMs))")
        }
        if let hint = detail.flatMap({ Self.hints[$0.reason] }) {
            lines.append("  \(hint)")
        }
        if let requestID = detail?.requestId, !requestID.isEmpty {
            lines.append("  request id: \(requestID)")
        }
        self.init(lines: lines, exitStatus: error.code == .unavailable ? .unavailable : .serverError)
    }

    /// The first line: the server's message (written for people, never containing other users' data), or
    /// a text of our own where the client knows better (unreachable gateway, local deadline) or none came.
    static func summary(_ error: RPCError, target: GatewayTarget, timeout: Duration) -> String {
        let message = error.message
        switch error.code {
        case .unavailable where error.metadata.isEmpty:
            // Raised by the client itself: no connection. Its message often repeats the address.
            let detail = message.isEmpty || message.contains(target.address) ? "" : ": \(message)"
            return "cannot reach the gateway at \(target.address)\(detail) (is it running? --gateway, --tls)"
        case .unavailable:
            // Sent by the gateway: it or a service behind it cannot serve the call now.
            return "the gateway at \(target.address) is unavailable"
                + (message.isEmpty ? "; try again later" : ": \(message)")
        case .deadlineExceeded:
            return
                "no answer from \(target.address) within \(Self.seconds(milliseconds: timeout.milliseconds)) (raise --timeout?)"
        case .unimplemented:
            return "the gateway at \(target.address) does not offer this call (an older version?)"
                + (message.isEmpty ? "" : " (\(message))")
        default:
            return message.isEmpty ? Self.statusText(error.code) : message
        }
    }

    /// A generic text for each status code, for errors that come without a message.
    static func statusText(_ code: StatusCode) -> String {
        switch code {
        case .ok: "no error"
        case .cancelled: "the call was cancelled"
        case .invalidArgument: "the request is invalid"
        case .deadlineExceeded: "the call timed out"
        case .notFound: "not found"
        case .alreadyExists: "already exists"
        case .permissionDenied: "not allowed"
        case .resourceExhausted: "too many requests; try again later"
        case .failedPrecondition: "not possible in the current state"
        case .aborted: "the call was aborted by a concurrent change; try again"
        case .outOfRange: "out of range"
        case .unimplemented: "not supported by the gateway"
        case .unavailable: "the gateway is unavailable"
        case .dataLoss: "the server lost data"
        case .unauthenticated: "not authenticated"
        default: "the gateway failed to process the call"  // UNKNOWN, INTERNAL
        }
    }

    /// What to do next, for reasons where the CLI has a command to suggest.
    static let hints: [String: String] = [
        "EMAIL_NOT_VERIFIED": "confirm the address: `kindred verify --email ADDRESS --code CODE` "
            + "(`kindred resend-verification --email ADDRESS` sends a new code)",
        "REAUTHENTICATION_REQUIRED": "sign in again (`kindred signin`) and retry within 10 minutes",
        "TOKEN_EXPIRED":
            "ask for a new mail: `kindred resend-verification` (sign-up) or `kindred password-reset request`",
        "TOKEN_REUSED": "the session was ended for safety: run `kindred signin`",
        "PASSWORD_TOO_COMMON": "choose a less common password",
        "PROFILE_NOT_FOUND": "create your profile first: `kindred profile create --name NAME --birth-date YYYY-MM-DD ...`",
        "PROFILE_INCOMPLETE": "your profile is not complete or not shown yet: `kindred profile show` says what it misses "
            + "(a profile just completed appears within seconds)",
        "LOCATION_REQUIRED": "set your location first: `kindred location set LATITUDE LONGITUDE`",
        "PROFILES_UNAVAILABLE": "the profile service did not answer in time; try again in a moment",
    ]

    /// "1.5 s", "30 s", "2 min 5 s".
    static func seconds(milliseconds: Int64) -> String {
        if milliseconds < 10_000 && milliseconds % 1000 != 0 {
            return "\(Double(milliseconds) / 1000) s"
        }
        let seconds = (milliseconds + 999) / 1000
        if seconds < 60 { return "\(seconds) s" }
        return seconds % 60 == 0 ? "\(seconds / 60) min" : "\(seconds / 60) min \(seconds % 60) s"
    }
}

extension RPCError {
    /// The detail's reason code, e.g. "INVALID_CREDENTIALS".
    public var reason: String? {
        guard let reason = self.errorDetail?.reason, !reason.isEmpty else { return nil }
        return reason
    }
}

extension Duration {
    /// Whole milliseconds.
    var milliseconds: Int64 {
        self.components.seconds * 1000 + self.components.attoseconds / 1_000_000_000_000_000
    }
}
