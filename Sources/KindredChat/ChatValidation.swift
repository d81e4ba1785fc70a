import Foundation
import KindredServiceKit

/// The documented input rules of the chat contract, as pure functions (tested without I/O).
public enum ChatValidation {
    /// Longest client_message_id.
    public static let maxClientMessageIDLength = 64

    /// A thread or message id: a canonical UUID, lower-cased. INVALID_ARGUMENT otherwise.
    public static func id(_ text: String, field: String) throws(ChatError) -> String {
        guard UUIDv7.isValid(text) else { throw ChatError.invalid(field, "INVALID_ID", "a UUID") }
        return text.lowercased()
    }

    /// 1..64 characters of [A-Za-z0-9_-].
    public static func clientMessageID(_ text: String) throws(ChatError) -> String {
        let allowed = text.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a)
                || byte == 0x2d || byte == 0x5f
        }
        guard !text.isEmpty, text.utf8.count <= Self.maxClientMessageIDLength, allowed else {
            throw ChatError.invalid("client_message_id", "INVALID_CLIENT_MESSAGE_ID", "1..64 characters of [A-Za-z0-9_-]")
        }
        return text
    }

    /// The body as stored (`TextRule.messageBody`): trimmed of surrounding whitespace, "\r\n" as "\n",
    /// 1..2000 characters and at most 8000 bytes, no control characters except newline (a tab, a lone carriage
    /// return, NUL, escape sequences and C1 controls are refused) and no bidi overrides. The reasons keep the
    /// contract's names: BODY_EMPTY, BODY_TOO_LONG, BODY_TOO_MANY_BYTES, BODY_CONTROL_CHARACTER.
    public static func body(_ text: String) throws(ChatError) -> String {
        do throws(TextViolation) {
            return try TextRule.messageBody.validate(text, field: "body")
        } catch {
            let reason =
                switch error.reason {
                case .required: "BODY_EMPTY"
                case .tooManyBytes: "BODY_TOO_MANY_BYTES"
                case .forbiddenCharacter: "BODY_CONTROL_CHARACTER"
                default: "BODY_TOO_LONG"
                }
            throw ChatError.invalid("body", reason, error.hint)
        }
    }

    /// A page size: 0 means `defaultSize`, else 1...100.
    public static func pageSize(_ value: Int32, default defaultSize: Int) throws(ChatError) -> Int {
        if value == 0 { return defaultSize }
        guard (1...100).contains(value) else { throw ChatError.invalid("page_size", "OUT_OF_RANGE", "1..100") }
        return Int(value)
    }
}
