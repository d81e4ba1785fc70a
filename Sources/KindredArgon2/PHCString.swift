/// The parameters recorded in an Argon2id PHC string
/// (`$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>`), read without touching libargon2.
public struct Argon2idEncodedParameters: Sendable, Hashable {
    /// The Argon2 version number: 19 (0x13) for current hashes, 16 (0x10) when `v=` is absent.
    public var version: Int
    public var memoryKiB: UInt32
    public var iterations: UInt32
    public var parallelism: UInt32
    public var saltLength: Int
    public var hashLength: Int

    /// Parses an encoded hash. Throws ``Argon2Error/Code/malformedHash`` for anything that is not a
    /// well-formed Argon2id PHC string.
    public init(parsing encoded: String) throws {
        // "$argon2id$v=19$m=..,t=..,p=..$salt$hash" splits into ["", "argon2id", "v=19", params, salt, hash];
        // libargon2 also accepts the pre-1.3 form without "v=".
        var parts = encoded.split(separator: "$", omittingEmptySubsequences: false)[...]
        guard parts.popFirst() == "", parts.popFirst() == "argon2id" else { throw Self.malformed }
        if parts.count == 4 {
            guard let version = parts.popFirst().flatMap({ Self.value(of: "v", in: $0) }) else { throw Self.malformed }
            self.version = Int(version)
        } else {
            self.version = 0x10
        }
        guard parts.count == 3 else { throw Self.malformed }
        let fields = parts.removeFirst().split(separator: ",", omittingEmptySubsequences: false)
        guard fields.count == 3,
            let memory = Self.value(of: "m", in: fields[0]),
            let iterations = Self.value(of: "t", in: fields[1]),
            let parallelism = Self.value(of: "p", in: fields[2]),
            let saltLength = Self.decodedLength(ofBase64: parts.removeFirst()),
            let hashLength = Self.decodedLength(ofBase64: parts.removeFirst())
        else { throw Self.malformed }
        self.memoryKiB = memory
        self.iterations = iterations
        self.parallelism = parallelism
        self.saltLength = saltLength
        self.hashLength = hashLength
    }

    private static let malformed = Argon2Error(code: .malformedHash, reason: "not an Argon2id PHC string")

    /// The number in `name=number`, which must be decimal without sign or leading zeros.
    private static func value(of name: String, in field: Substring) -> UInt32? {
        guard field.hasPrefix(name + "=") else { return nil }
        let digits = field.dropFirst(name.utf8.count + 1)
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            digits == "0" || !digits.hasPrefix("0")
        else { return nil }
        return UInt32(digits)
    }

    /// The byte length of unpadded standard base64 text, or nil if it is not such text.
    private static func decodedLength(ofBase64 text: Substring) -> Int? {
        let isBase64 = text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"):
                true
            default:
                false
            }
        }
        let count = text.utf8.count
        guard isBase64, count > 0, count % 4 != 1 else { return nil }
        return count * 3 / 4
    }
}
