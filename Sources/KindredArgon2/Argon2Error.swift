/// An error from password hashing.
///
/// The description names what went wrong and, for library failures, libargon2's fixed message
/// for its return code. It never contains a password, a salt or an encoded hash.
public struct Argon2Error: Error, CustomStringConvertible, Sendable, Equatable {
    /// What went wrong; a struct around a private enum so that codes can be added.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: Sendable, Hashable {
            case malformedHash
            case invalidParameters
            case randomUnavailable
            case hashingFailed
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The encoded hash is not a well-formed `$argon2id$` PHC string.
        public static let malformedHash = Code(.malformedHash)
        /// The parameters are outside what libargon2 accepts (e.g. a salt shorter than 8 bytes).
        public static let invalidParameters = Code(.invalidParameters)
        /// The operating system's random source failed.
        public static let randomUnavailable = Code(.randomUnavailable)
        /// libargon2 failed for another reason (typically memory allocation).
        public static let hashingFailed = Code(.hashingFailed)

        public var description: String {
            switch self.base {
            case .malformedHash: "malformedHash"
            case .invalidParameters: "invalidParameters"
            case .randomUnavailable: "randomUnavailable"
            case .hashingFailed: "hashingFailed"
            }
        }
    }

    public var code: Code
    /// A fixed, secret-free explanation (libargon2's message for its return code, or ours).
    public var reason: String

    package init(code: Code, reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "Argon2Error(\(self.code): \(self.reason))" }
}
