internal import CArgon2

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Argon2id password hashing with libargon2, stored as PHC strings so parameters can rise later.
///
/// Each call allocates `memoryKiB` of memory and runs for tens of milliseconds on one core:
/// callers should run it off the event loop and bound how many run at once.
public struct Argon2id: Sendable {
    /// Cost parameters. The defaults are OWASP's first choice: m = 19 MiB, t = 2, p = 1.
    public struct Parameters: Sendable, Hashable {
        public var memoryKiB: UInt32
        public var iterations: UInt32
        public var parallelism: UInt32
        public var saltLength: Int
        public var hashLength: Int

        public init(
            memoryKiB: UInt32 = 19456,
            iterations: UInt32 = 2,
            parallelism: UInt32 = 1,
            saltLength: Int = 16,
            hashLength: Int = 32
        ) {
            self.memoryKiB = memoryKiB
            self.iterations = iterations
            self.parallelism = parallelism
            self.saltLength = saltLength
            self.hashLength = hashLength
        }

        /// m = 19456 KiB, t = 2, p = 1, 16-byte salt, 32-byte hash.
        public static let owasp = Parameters()
    }

    public var parameters: Parameters

    public init(parameters: Parameters = .owasp) {
        self.parameters = parameters
    }

    /// Hashes a password with a fresh random salt from `getrandom(2)`.
    /// - Returns: the PHC string, e.g. `$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>`.
    public func hash(password: String) throws -> String {
        try self.hash(password: password, salt: Self.randomSalt(count: self.parameters.saltLength))
    }

    /// Hashes a password with the given salt (which must be unique per hash and at least 8 bytes).
    /// The whole UTF-8 password is hashed: nothing is truncated, embedded NULs included.
    public func hash(password: String, salt: [UInt8]) throws -> String {
        let p = self.parameters
        guard let hashLength = UInt32(exactly: p.hashLength), let saltLength = UInt32(exactly: salt.count) else {
            throw Argon2Error(code: .invalidParameters, reason: "salt or hash length out of range")
        }
        // Includes the terminating NUL.
        let capacity = argon2_encodedlen(p.iterations, p.memoryKiB, p.parallelism, saltLength, hashLength, Argon2_id)
        var encoded = [CChar](repeating: 0, count: capacity)
        let result = Self.withPasswordBytes(password) { password in
            salt.withUnsafeBytes { salt in
                // Returns ARGON2_OK, a parameter error (ARGON2_*_TOO_SHORT/LONG/SMALL/..., for
                // out-of-range costs or lengths), ARGON2_MEMORY_ALLOCATION_ERROR,
                // ARGON2_THREAD_FAIL or ARGON2_ENCODING_FAIL (buffer too small: impossible here).
                argon2id_hash_encoded(
                    p.iterations,
                    p.memoryKiB,
                    p.parallelism,
                    password.baseAddress,
                    password.count,
                    salt.baseAddress,
                    salt.count,
                    Int(hashLength),
                    &encoded,
                    encoded.count
                )
            }
        }
        switch Argon2_ErrorCodes(rawValue: result) {
        case ARGON2_OK:
            return String(decoding: encoded.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        case ARGON2_MEMORY_ALLOCATION_ERROR, ARGON2_THREAD_FAIL:
            throw Argon2Error(code: .hashingFailed, reason: Self.message(for: result))
        case ARGON2_ENCODING_FAIL:
            preconditionFailure("argon2_encodedlen() sized the buffer too small")
        default:
            throw Argon2Error(code: .invalidParameters, reason: Self.message(for: result))
        }
    }

    /// Checks a password against an encoded Argon2id hash in constant time.
    /// - Returns: whether the password matches.
    /// - Throws: ``Argon2Error`` with ``Argon2Error/Code/malformedHash`` when `encoded` is not a
    ///   valid Argon2id PHC string (a mismatch is `false`, never an error).
    public func verify(password: String, encoded: String) throws -> Bool {
        // Parse first: it rejects other variants and garbage without running the hash, and stops
        // a stored string with absurd costs from reaching libargon2 unchecked.
        _ = try Argon2idEncodedParameters(parsing: encoded)
        let result = Self.withPasswordBytes(password) { password in
            // Returns ARGON2_OK (match), ARGON2_VERIFY_MISMATCH, ARGON2_DECODING_FAIL and other
            // parameter errors (malformed string), ARGON2_MEMORY_ALLOCATION_ERROR.
            argon2id_verify(encoded, password.baseAddress, password.count)
        }
        switch Argon2_ErrorCodes(rawValue: result) {
        case ARGON2_OK:
            return true
        case ARGON2_VERIFY_MISMATCH:
            return false
        case ARGON2_MEMORY_ALLOCATION_ERROR, ARGON2_THREAD_FAIL:
            throw Argon2Error(code: .hashingFailed, reason: Self.message(for: result))
        default:
            throw Argon2Error(code: .malformedHash, reason: Self.message(for: result))
        }
    }

    /// Whether a stored hash was made with parameters other than the current ones (costs,
    /// lengths or Argon2 version), so it should be replaced after the next successful sign-in.
    public func needsRehash(encoded: String) throws -> Bool {
        let stored = try Argon2idEncodedParameters(parsing: encoded)
        let p = self.parameters
        return stored.version != Int(ARGON2_VERSION_NUMBER.rawValue) || stored.memoryKiB != p.memoryKiB
            || stored.iterations != p.iterations || stored.parallelism != p.parallelism
            || stored.saltLength != p.saltLength || stored.hashLength != p.hashLength
    }

    /// `count` bytes from the kernel's CSPRNG (`getrandom(2)`, blocking only before it is seeded).
    static func randomSalt(count: Int) throws -> [UInt8] {
        var salt = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let read = salt.withUnsafeMutableBytes { getrandom($0.baseAddress! + filled, count - filled, 0) }
            if read > 0 {
                filled += read
            } else if read < 0 && errno == EINTR {
                continue
            } else {
                // ENOSYS (kernel < 3.17), EFAULT, EINVAL: nothing sensible to do but fail.
                throw Argon2Error(code: .randomUnavailable, reason: "getrandom(2) failed")
            }
        }
        return salt
    }

    /// The password's UTF-8 bytes without a copy when the string is native.
    private static func withPasswordBytes<R>(_ password: String, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        if let result = password.utf8.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        var bytes = Array(password.utf8)
        defer { for index in bytes.indices { bytes[index] = 0 } }
        return bytes.withUnsafeBytes(body)
    }

    /// libargon2's fixed message for a return code; it never contains input data.
    private static func message(for code: Int32) -> String {
        String(cString: argon2_error_message(code))
    }
}
