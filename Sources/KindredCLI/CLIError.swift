/// The exit statuses of `kindred`, documented in `kindred --help`.
public enum ExitStatus: Int32, Sendable {
    case success = 0
    /// The gateway answered with an error.
    case serverError = 1
    /// The command line or the local state (session file, terminal input) does not allow the command.
    case localError = 2
    /// The gateway could not be reached (or reported itself unavailable).
    case unavailable = 3
}

/// A failure found on this machine, before or instead of a call: always exit status 2.
///
/// Like postgres-nio's `PSQLError`, a struct around a private enum, so cases can be added without breaking
/// `switch`es elsewhere; `description` is the message the user sees.
public struct CLIError: Error, Hashable, Sendable, CustomStringConvertible {
    fileprivate enum Base: Hashable, Sendable {
        case notSignedIn
        case sessionEnded(reason: String?)
        case sessionMismatch(signedIn: String, requested: String)
        case unreadableSession(path: String, problem: String)
        case storage(path: String, operation: String, errno: Int32)
        case usage(String)
        case input(String)
    }
    fileprivate let base: Base

    public static let notSignedIn = CLIError(base: .notSignedIn)

    /// The server refused the stored refresh token (expired, revoked or reused); the local session was removed.
    public static func sessionEnded(reason: String?) -> CLIError { CLIError(base: .sessionEnded(reason: reason)) }

    /// The stored session belongs to another gateway or community than the one the command should talk to.
    public static func sessionMismatch(signedIn: String, requested: String) -> CLIError {
        CLIError(base: .sessionMismatch(signedIn: signedIn, requested: requested))
    }

    public static func unreadableSession(path: String, problem: String) -> CLIError {
        CLIError(base: .unreadableSession(path: path, problem: problem))
    }

    /// A file-system call failed; `operation` names it ("create", "rename"...).
    public static func storage(path: String, operation: String, errno: Int32) -> CLIError {
        CLIError(base: .storage(path: path, operation: operation, errno: errno))
    }

    /// Options that parse but do not make sense together.
    public static func usage(_ message: String) -> CLIError { CLIError(base: .usage(message)) }

    /// Missing or unusable input (passwords, confirmations).
    public static func input(_ message: String) -> CLIError { CLIError(base: .input(message)) }

    public var exitStatus: ExitStatus { .localError }

    public var isUnreadableSession: Bool {
        if case .unreadableSession = self.base { return true }
        return false
    }

    public var description: String {
        switch self.base {
        case .notSignedIn:
            return "not signed in: run `kindred signin`"
        case .sessionEnded(let reason):
            let suffix = reason.map { " [\($0)]" } ?? ""
            return "the session has ended (expired or revoked): run `kindred signin`\(suffix)"
        case .sessionMismatch(let signedIn, let requested):
            return "signed in to \(signedIn), not to \(requested): run `kindred signin` there, "
                + "or drop --gateway/--community (and KINDRED_GATEWAY/KINDRED_COMMUNITY)"
        case .unreadableSession(let path, let problem):
            return "the session file \(path) is unreadable (\(problem)): run `kindred signout` to remove it, "
                + "then `kindred signin`"
        case .storage(let path, let operation, let errno):
            return "cannot \(operation) \(path): \(systemErrorText(errno))"
        case .usage(let message), .input(let message):
            return message
        }
    }
}
