import Foundation
import KindredGRPCServices
import KindredServiceKit

/// Input rules of the auth contract. Each function returns the normalised value or throws INVALID_ARGUMENT
/// naming the field.
enum Validation {
    /// Trimmed and lower-cased as a whole: the domain is case-insensitive by standard, and the local part is
    /// lower-cased too because every large provider treats it so and two accounts differing only in case
    /// would be a phishing aid.
    static func email(_ raw: String, field: String = "email") throws -> String {
        let email = raw.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        guard (3...254).contains(email.count), email.utf8.count <= 254 else {
            throw AuthError.invalid(field, email.count < 3 ? "TOO_SHORT" : "TOO_LONG", "3..254 characters and bytes")
        }
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty, !parts[1].hasPrefix("."),
            !parts[1].hasSuffix("."),
            email.unicodeScalars.allSatisfy({ !CharacterSet.whitespacesAndNewlines.contains($0) && $0.value >= 0x21 })
        else {
            throw AuthError.invalid(field, "INVALID_FORMAT", "an address with exactly one '@'")
        }
        return email
    }

    /// 3..30 characters of [a-z0-9_.] after lower-casing, not starting or ending with '.'; first
    /// `TextRule.username` on the text as typed (30 bytes, no invisible or bidi characters).
    static func username(_ raw: String, field: String = "username") throws -> String {
        let username = try TextRule.username.validate(raw, field: field, as: AuthError.init).lowercased()
        guard (3...30).contains(username.count) else {
            throw AuthError.invalid(field, username.count < 3 ? "TOO_SHORT" : "TOO_LONG", "3..30 characters")
        }
        guard username.utf8.allSatisfy({ isUsernameByte($0) }), !username.hasPrefix("."), !username.hasSuffix(".")
        else {
            throw AuthError.invalid(field, "INVALID_FORMAT", "letters, digits, '_' and '.', not at the ends")
        }
        return username
    }

    private static func isUsernameByte(_ byte: UInt8) -> Bool {
        (byte >= 0x61 && byte <= 0x7a) || (byte >= 0x30 && byte <= 0x39) || byte == 0x5f || byte == 0x2e
    }

    /// A password's byte cap: 128 characters of four bytes each, with room for composed ones. Passwords are never
    /// trimmed or otherwise changed, so they do not go through a `TextRule`.
    static let maxPasswordBytes = 1024

    /// A new password: 8..128 characters (grapheme clusters, never truncated) and at most 1024 bytes, not on the
    /// common list.
    static func newPassword(_ password: String, field: String, common: CommonPasswords) throws {
        let count = password.count
        guard count >= 8 else { throw AuthError.invalid(field, "TOO_SHORT", "at least 8 characters") }
        guard count <= 128 else { throw AuthError.invalid(field, "TOO_LONG", "at most 128 characters") }
        guard password.utf8.count <= Self.maxPasswordBytes else {
            throw AuthError.invalid(field, "TOO_MANY_BYTES", "at most 1024 bytes")
        }
        if common.contains(password) {
            throw AuthError.invalid(field, "PASSWORD_TOO_COMMON", "this password is too common")
        }
    }

    /// A password presented to prove knowledge: 1..128 characters, at most 1024 bytes.
    static func presentedPassword(_ password: String, field: String) throws {
        guard !password.isEmpty else { throw AuthError.invalid(field, "REQUIRED", "required") }
        guard password.count <= 128 else { throw AuthError.invalid(field, "TOO_LONG", "at most 128 characters") }
        guard password.utf8.count <= Self.maxPasswordBytes else {
            throw AuthError.invalid(field, "TOO_MANY_BYTES", "at most 1024 bytes")
        }
    }

    /// Community slug: 2..32 characters of [a-z0-9-].
    static func community(_ raw: String, field: String = "community_id") throws -> String {
        guard (2...32).contains(raw.utf8.count),
            raw.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2d })
        else {
            throw AuthError.invalid(field, "INVALID_FORMAT", "2..32 characters of [a-z0-9-]")
        }
        return raw
    }

    static func token(_ raw: String, field: String = "token") throws -> String {
        guard OpaqueToken.isPlausible(raw) else {
            throw AuthError.invalid(field, raw.isEmpty ? "REQUIRED" : "INVALID_FORMAT", "the token from the email")
        }
        return raw
    }

}

extension AuthError {
    /// INVALID_ARGUMENT for a text field that breaks its `TextRule`.
    init(_ violation: TextViolation) {
        self = .invalid(violation.field, violation.reason.code, violation.hint)
    }
}

/// The common-password list: the 10,000 most frequent entries of zxcvbn's `passwords` list (MIT), bundled
/// as `Resources/common-passwords.txt`. Compared case-insensitively.
public struct CommonPasswords: Sendable {
    private let entries: Set<String>

    public init(entries: Set<String>) { self.entries = entries }

    public static func bundled() throws -> CommonPasswords {
        guard
            let url = Bundle.module.url(
                forResource: "common-passwords",
                withExtension: "txt",
                subdirectory: "Resources"
            )
                ?? Bundle.module.url(forResource: "common-passwords", withExtension: "txt")
        else {
            throw ConfigurationError(key: "Resources/common-passwords.txt", problem: "is missing from the bundle")
        }
        let text = try String(contentsOf: url, encoding: .utf8)
        return CommonPasswords(entries: Set(text.split(separator: "\n").map { String($0).lowercased() }))
    }

    public func contains(_ password: String) -> Bool { self.entries.contains(password.lowercased()) }
    public var count: Int { self.entries.count }
}
