import KindredGRPCServices
import KindredProto

/// A text field that breaks its `TextRule`: the field's path, a stable reason code and a hint that states the
/// limits (never the rejected text). Services answer it as INVALID_ARGUMENT carrying `fieldViolation`.
public struct TextViolation: Error, Hashable, Sendable, CustomStringConvertible {
    /// The reason codes, as they appear in `kindred.common.v1.FieldViolation.reason`.
    public struct Reason: Hashable, Sendable, CustomStringConvertible {
        public let code: String
        private init(_ code: String) { self.code = code }

        /// Empty (after trimming) where text is required.
        public static let required = Reason("REQUIRED")
        /// Fewer characters than the field's minimum.
        public static let tooShort = Reason("TOO_SHORT")
        /// More characters (grapheme clusters) than the field's maximum.
        public static let tooLong = Reason("TOO_LONG")
        /// Within the characters but more UTF-8 bytes than the field's maximum (combining marks, long sequences).
        public static let tooManyBytes = Reason("TOO_MANY_BYTES")
        /// A control character, a line break in a one-line field, a bidi override, or an invisible character in
        /// a name.
        public static let forbiddenCharacter = Reason("FORBIDDEN_CHARACTER")
        /// Bytes that are not UTF-8.
        public static let invalidUTF8 = Reason("INVALID_UTF8")

        public var description: String { self.code }
    }

    public let field: String
    public let reason: Reason
    public let hint: String

    public init(field: String, reason: Reason, hint: String) {
        self.field = field
        self.reason = reason
        self.hint = hint
    }

    /// The violation as the error detail's field violation.
    public var fieldViolation: Kindred.Common.V1.FieldViolation {
        Kindred.Common.V1.FieldViolation(field: self.field, reason: self.reason.code, hint: self.hint)
    }

    public var description: String { "\(self.field) \(self.reason.code)" }
}
