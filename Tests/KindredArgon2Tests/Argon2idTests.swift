import Foundation
import KindredArgon2
import Testing

@Suite("Argon2id")
struct Argon2idTests {
    /// Cheap parameters so the suite stays fast; the OWASP defaults get one round trip below.
    private let fast = Argon2id(parameters: .init(memoryKiB: 64, iterations: 1, parallelism: 1))

    /// Vectors from libargon2's own test suite (`src/test.c`) and from its `argon2` CLI.
    @Test(arguments: [
        (
            "password", "somesalt", Argon2id.Parameters(memoryKiB: 65536, iterations: 2, parallelism: 1),
            "$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc"
        ),
        (
            "password", "somesalt", Argon2id.Parameters.owasp,
            "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHQ$PL01amPyeUuxG7H0vIr5X+qHkZvWnHmGBGXFYvh8z2E"
        ),
        (
            "pässwörd 🔐", "saltsaltsalt", Argon2id.Parameters.owasp,
            "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$HCmhll6NE5Ln5x8m0Y4zxmwyy/UDOUTVgOBC/OwGwUo"
        ),
        (
            "a\0b", "somesalt", Argon2id.Parameters(memoryKiB: 64, iterations: 1, parallelism: 1),
            "$argon2id$v=19$m=64,t=1,p=1$c29tZXNhbHQ$YH5LH3SREWBZAsD4qNs6v2A/bHNkccBelye31D3kZ3c"
        ),
    ])
    func referenceVector(password: String, salt: String, parameters: Argon2id.Parameters, expected: String) throws {
        let argon2 = Argon2id(parameters: parameters)
        #expect(try argon2.hash(password: password, salt: Array(salt.utf8)) == expected)
        #expect(try argon2.verify(password: password, encoded: expected))
    }

    @Test func owaspRoundTrip() throws {
        let argon2 = Argon2id()
        let encoded = try argon2.hash(password: "correct horse battery staple")
        #expect(encoded.hasPrefix("$argon2id$v=19$m=19456,t=2,p=1$"))
        #expect(try argon2.verify(password: "correct horse battery staple", encoded: encoded))
        #expect(try !argon2.verify(password: "correct horse battery stapl", encoded: encoded))
        #expect(try !argon2.needsRehash(encoded: encoded))
    }

    @Test func saltsAreFresh() throws {
        let first = try self.fast.hash(password: "same password")
        let second = try self.fast.hash(password: "same password")
        #expect(first != second)
        let parsed = try Argon2idEncodedParameters(parsing: first)
        #expect(parsed.saltLength == 16)
        #expect(parsed.hashLength == 32)
    }

    @Test(arguments: [
        "", "x", "wrong password", "correct horse battery staple ", "a\0b", String(repeating: "ü", count: 200),
    ])
    func wrongPasswordIsMismatch(password: String) throws {
        let encoded = try self.fast.hash(password: "correct horse battery staple")
        #expect(try !self.fast.verify(password: password, encoded: encoded))
    }

    /// bcrypt stops at 72 bytes; every byte of the password counts here.
    @Test func longPasswordsAreNotTruncated() throws {
        let long = String(repeating: "p", count: 1000)
        let encoded = try self.fast.hash(password: long + "1")
        #expect(try self.fast.verify(password: long + "1", encoded: encoded))
        #expect(try !self.fast.verify(password: long + "2", encoded: encoded))
    }

    @Test(arguments: [
        "",
        "not a hash",
        "$argon2i$v=19$m=64,t=1,p=1$c29tZXNhbHQ$YH5LH3SREWBZAsD4qNs6v2A/bHNkccBelye31D3kZ3c",
        "$argon2id$v=19$m=64,t=1$c29tZXNhbHQ$YH5LH3SREWBZAsD4qNs6v2A/bHNkccBelye31D3kZ3c",
        "$argon2id$v=19$m=64,t=1,p=1$c29tZXNhbHQ$YH5LH3SREWBZAsD4qNs6v2A/bHNkccBelye31D3kZ3c=",
        "$argon2id$v=19$m=64,t=1,p=1$c29tZXNhbHQ",
        "$argon2id$v=19$m=-64,t=1,p=1$c29tZXNhbHQ$YH5LH3SREWBZAsD4qNs6v2A/bHNkccBelye31D3kZ3c",
        "$argon2id$v=19$m=064,t=1,p=1$c29tZXNhbHQ$YH5LH3SREWBZAsD4qNs6v2A/bHNkccBelye31D3kZ3c",
        "$argon2id$v=19$m=64,t=1,p=1$$YH5LH3SREWBZAsD4qNs6v2A/bHNkccBelye31D3kZ3c",
        "$argon2id$v=19$m=1,t=1,p=1$c29tZXNhbHQ$YH5LH3SREWBZAsD4qNs6v2A/bHNkccBelye31D3kZ3c",
    ])
    func malformedHashThrows(encoded: String) {
        #expect(throws: Argon2Error.self) { try self.fast.verify(password: "a\0b", encoded: encoded) }
    }

    @Test func malformedErrorDoesNotEchoInput() {
        let encoded = "$argon2id$v=19$m=64,t=1,p=1$c2VjcmV0c2FsdA$garbage!"
        do {
            _ = try self.fast.verify(password: "hunter2", encoded: encoded)
            Issue.record("expected an error")
        } catch {
            #expect((error as? Argon2Error)?.code == .malformedHash)
            #expect(!"\(error)".contains("c2VjcmV0c2FsdA"))
            #expect(!"\(error)".contains("hunter2"))
        }
    }

    @Test func parsesParameters() throws {
        let parsed = try Argon2idEncodedParameters(
            parsing: "$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc"
        )
        #expect(parsed.version == 19)
        #expect(parsed.memoryKiB == 65536)
        #expect(parsed.iterations == 3)
        #expect(parsed.parallelism == 4)
        #expect(parsed.saltLength == 8)
        #expect(parsed.hashLength == 32)
        let legacy = try Argon2idEncodedParameters(parsing: "$argon2id$m=64,t=1,p=1$c29tZXNhbHQ$AAAAAAAAAAAAAAAAAAAAAA")
        #expect(legacy.version == 16)
        #expect(legacy.hashLength == 16)
    }

    @Test(arguments: [
        ("$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$PL01amPyeUuxG7H0vIr5X+qHkZvWnHmGBGXFYvh8z2E", false),
        ("$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$PL01amPyeUuxG7H0vIr5X+qHkZvWnHmGBGXFYvh8z2E", true),
        ("$argon2id$v=19$m=19456,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$PL01amPyeUuxG7H0vIr5X+qHkZvWnHmGBGXFYvh8z2E", true),
        ("$argon2id$v=19$m=19456,t=2,p=2$c29tZXNhbHRzb21lc2FsdA$PL01amPyeUuxG7H0vIr5X+qHkZvWnHmGBGXFYvh8z2E", true),
        ("$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHQ$PL01amPyeUuxG7H0vIr5X+qHkZvWnHmGBGXFYvh8z2E", true),
        ("$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$PL01amPyeUuxG7H0vIr5Xw", true),
        ("$argon2id$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$PL01amPyeUuxG7H0vIr5X+qHkZvWnHmGBGXFYvh8z2E", true),
    ])
    func needsRehash(encoded: String, expected: Bool) throws {
        #expect(try Argon2id().needsRehash(encoded: encoded) == expected)
    }

    @Test func rejectsTooShortSalt() {
        #expect(throws: Argon2Error.self) { try self.fast.hash(password: "pw", salt: [1, 2, 3]) }
    }

    /// Cross-checks a random password and salt against the `argon2` CLI (Debian package
    /// `argon2`) when it is installed.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/argon2")))
    func matchesArgon2CLI() throws {
        let password = "pw-\(UInt64.random(in: 0...UInt64.max))-ü"
        let salt = "salt\(UInt32.random(in: 10_000_000...99_999_999))"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/argon2")
        process.arguments = [salt, "-id", "-t", "2", "-k", "256", "-p", "1", "-l", "32", "-e"]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(Data(password.utf8))
        try input.fileHandleForWriting.close()
        let cli = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let argon2 = Argon2id(parameters: .init(memoryKiB: 256, iterations: 2, parallelism: 1))
        let ours = try argon2.hash(password: password, salt: Array(salt.utf8))
        #expect(ours == cli.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
