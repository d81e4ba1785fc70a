/// A message could not be packed or unpacked.
///
/// The description names the failure and the message type, never the data (STYLE.md §6).
public struct ProtoError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong; more codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case malformed, invalidUTF8, tooLarge, nestingTooDeep, unknownMessage
        }

        private let base: Base

        private init(_ base: Base) { self.base = base }

        /// The bytes are not a valid encoding of the message type (truncated, wrong wire type,
        /// bad varint, group, ...).
        public static let malformed = Code(.malformed)
        /// A string field holds bytes that are not UTF-8, which proto3 forbids.
        public static let invalidUTF8 = Code(.invalidUTF8)
        /// The message, encoded or decoded, exceeds protobuf's 2 GiB limit or the decoder's memory
        /// budget.
        public static let tooLarge = Code(.tooLarge)
        /// Messages nest deeper than `ProtoDecodingLimits.maximumNesting`.
        public static let nestingTooDeep = Code(.nestingTooDeep)
        /// No message type with the requested name is registered.
        public static let unknownMessage = Code(.unknownMessage)

        public var description: String {
            switch base {
            case .malformed: "malformed"
            case .invalidUTF8: "invalidUTF8"
            case .tooLarge: "tooLarge"
            case .nestingTooDeep: "nestingTooDeep"
            case .unknownMessage: "unknownMessage"
            }
        }

        fileprivate var explanation: String {
            switch base {
            case .malformed: "the bytes are not a valid protobuf encoding of the message"
            case .invalidUTF8: "a string field is not valid UTF-8"
            case .tooLarge: "the message is too large"
            case .nestingTooDeep: "messages are nested too deeply"
            case .unknownMessage: "the message type is unknown"
            }
        }
    }

    public var code: Code
    /// Full protobuf name of the message type concerned, when known.
    public var messageName: String?

    public init(code: Code, messageName: String? = nil) {
        self.code = code
        self.messageName = messageName
    }

    public var description: String {
        if let messageName {
            return "ProtoError(\(code)): \(code.explanation) (\(messageName))"
        }
        return "ProtoError(\(code)): \(code.explanation)"
    }
}
