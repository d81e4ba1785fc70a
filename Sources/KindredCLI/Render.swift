import Foundation
import KindredProto

/// Turns API responses into the lines `kindred` prints: aligned text for people, JSON (`--json`) for scripts.
///
/// The JSON uses the proto field names (snake_case), enum values by their proto names, and times as the
/// API's `*_unix_ms` numbers, so scripts can rely on the `.proto` documentation.
enum Render {
    // MARK: Text

    static func signedIn(_ session: StoredSession) -> String {
        "Signed in as \(session.username) (user \(session.userId)) — session \(session.sessionId)"
    }

    static func account(_ account: Kindred.Api.V1.Account, session: StoredSession?) -> [String] {
        var email = account.email.isEmpty ? "(none)" : account.email
        email += account.emailVerified ? " (verified)" : " (not verified)"
        var rows: [(String, String)] = [
            ("email", email),
            ("community", account.communityId),
            ("roles", account.roles.map { shortName(protoName($0), prefix: "ROLE_") }.joined(separator: ", ")),
            ("status", shortName(protoName(account.status), prefix: "ACCOUNT_STATUS_")),
        ]
        if !account.pendingEmail.isEmpty { rows.append(("pending email", account.pendingEmail)) }
        if !account.passwordSet { rows.append(("password", "not set")) }
        if !account.linkedProviders.isEmpty {
            let providers = account.linkedProviders.map { shortName(protoName($0), prefix: "IDENTITY_PROVIDER_") }
            rows.append(("linked", providers.joined(separator: ", ")))
        }
        rows.append(("created", time(account.createdUnixMs)))
        rows.append(("last sign-in", time(account.lastSignInUnixMs)))
        if let session { rows.append(("session", session.sessionId)) }
        return ["\(account.username) (user \(account.userId))"] + aligned(rows)
    }

    static func sessions(_ sessions: [Kindred.Api.V1.Session]) -> [String] {
        guard !sessions.isEmpty else { return ["No sessions."] }
        let header = ["", "SESSION", "METHOD", "LAST USED", "EXPIRES", "DEVICE"]
        let rows = sessions.map { session in
            [
                session.current ? "*" : "",
                session.sessionId,
                shortName(protoName(session.signInMethod), prefix: "SIGN_IN_METHOD_"),
                time(session.lastUsedUnixMs),
                time(session.expiresUnixMs),
                session.deviceName.isEmpty ? "-" : session.deviceName,
            ]
        }
        return table([header] + rows) + ["(* = this session)"]
    }

    /// "2025-01-02 15:04 UTC"; "-" for 0 (not set).
    static func time(_ unixMs: Int64) -> String {
        guard unixMs > 0 else { return "-" }
        var seconds = time_t(unixMs / 1000)
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return "-" }
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)) UTC"
    }

    private static func aligned(_ rows: [(String, String)]) -> [String] {
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { "  \($0.0 + ":")\(String(repeating: " ", count: width - $0.0.count + 1))\($0.1)" }
    }

    private static func table(_ rows: [[String]]) -> [String] {
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            row.indices.map { column in
                column == row.count - 1
                    ? row[column] : row[column].padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }
    }

    private static func shortName(_ protoName: String, prefix: String) -> String {
        (protoName.hasPrefix(prefix) ? String(protoName.dropFirst(prefix.count)) : protoName).lowercased()
            .replacingOccurrences(of: "_", with: " ")
    }

    // MARK: JSON

    struct AccountJSON: Encodable {
        var userId, communityId, email: String
        var emailVerified: Bool
        var pendingEmail, username: String
        var roles: [String]
        var status: String
        var passwordSet: Bool
        var linkedProviders: [String]
        var createdUnixMs, lastSignInUnixMs: Int64
        /// The session this CLI signed in with (not part of the API's Account).
        var sessionId: String?
    }

    struct SessionJSON: Encodable {
        var sessionId, signInMethod, deviceName, userAgent: String
        var current: Bool
        var createdUnixMs, lastUsedUnixMs, expiresUnixMs: Int64
    }

    static func json(_ account: Kindred.Api.V1.Account, session: StoredSession?) -> String {
        encode(
            AccountJSON(
                userId: account.userId,
                communityId: account.communityId,
                email: account.email,
                emailVerified: account.emailVerified,
                pendingEmail: account.pendingEmail,
                username: account.username,
                roles: account.roles.map(protoName),
                status: protoName(account.status),
                passwordSet: account.passwordSet,
                linkedProviders: account.linkedProviders.map(protoName),
                createdUnixMs: account.createdUnixMs,
                lastSignInUnixMs: account.lastSignInUnixMs,
                sessionId: session?.sessionId
            )
        )
    }

    static func json(_ sessions: [Kindred.Api.V1.Session]) -> String {
        let items = sessions.map {
            SessionJSON(
                sessionId: $0.sessionId,
                signInMethod: protoName($0.signInMethod),
                deviceName: $0.deviceName,
                userAgent: $0.userAgent,
                current: $0.current,
                createdUnixMs: $0.createdUnixMs,
                lastUsedUnixMs: $0.lastUsedUnixMs,
                expiresUnixMs: $0.expiresUnixMs
            )
        }
        return encode(["sessions": items])
    }

    static func encode(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(value) else { preconditionFailure("plain structs always encode") }
        return String(decoding: data, as: UTF8.self)
    }

    // MARK: Enum names (as in the .proto files)

    static func protoName(_ role: Kindred.Common.V1.Role) -> String {
        switch role {
        case .unspecified: "ROLE_UNSPECIFIED"
        case .user: "ROLE_USER"
        case .admin: "ROLE_ADMIN"
        case .service: "ROLE_SERVICE"
        case .unrecognized(let value): "\(value)"
        }
    }

    static func protoName(_ status: Kindred.Api.V1.AccountStatus) -> String {
        switch status {
        case .unspecified: "ACCOUNT_STATUS_UNSPECIFIED"
        case .pendingVerification: "ACCOUNT_STATUS_PENDING_VERIFICATION"
        case .active: "ACCOUNT_STATUS_ACTIVE"
        case .deactivated: "ACCOUNT_STATUS_DEACTIVATED"
        case .unrecognized(let value): "\(value)"
        }
    }

    static func protoName(_ provider: Kindred.Common.V1.IdentityProvider) -> String {
        switch provider {
        case .unspecified: "IDENTITY_PROVIDER_UNSPECIFIED"
        case .google: "IDENTITY_PROVIDER_GOOGLE"
        case .apple: "IDENTITY_PROVIDER_APPLE"
        case .unrecognized(let value): "\(value)"
        }
    }

    static func protoName(_ method: Kindred.Api.V1.SignInMethod) -> String {
        switch method {
        case .unspecified: "SIGN_IN_METHOD_UNSPECIFIED"
        case .password: "SIGN_IN_METHOD_PASSWORD"
        case .google: "SIGN_IN_METHOD_GOOGLE"
        case .apple: "SIGN_IN_METHOD_APPLE"
        case .unrecognized(let value): "\(value)"
        }
    }
}
