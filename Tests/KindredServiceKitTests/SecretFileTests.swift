import Foundation
import KindredGRPCServices
import KindredServiceKit
import Testing

@Suite("Secrets from files: every secret setting takes <KEY>_FILE")
struct SecretFileTests {
    /// A file holding `content` in a fresh temporary folder.
    static func file(_ content: String) throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("kindred-secret-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("secret").path
        try Data(content.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    static let value = String(repeating: "s", count: 40)

    @Test(
        "the value and where it came from",
        arguments: [
            // (file content or nil for no file, environment value, expected value, key the error names)
            (nil, nil, nil, nil),
            (nil, value, value, nil),
            (value, nil, value, nil),
            (value + "\n", nil, value, nil),  // `echo` and editors add a newline
            ("  \(value)\r\n", nil, value, nil),
            ("short", nil, nil, "KINDRED_X_SECRET_FILE"),
            (nil, "short", nil, "KINDRED_X_SECRET"),  // too short: refused, not taken as unset
            (value, value, nil, "KINDRED_X_SECRET"),  // both: refused, whichever would win
        ] as [(String?, String?, String?, String?)]
    )
    func fromFile(content: String?, environmentValue: String?, expected: String?, errorKey: String?) throws {
        var environment: [String: String] = [:]
        if let content { environment["KINDRED_X_SECRET_FILE"] = try Self.file(content) }
        if let environmentValue { environment["KINDRED_X_SECRET"] = environmentValue }
        let reader = EnvironmentReader(environment)
        if let errorKey {
            #expect { try reader.secret("KINDRED_X_SECRET", length: 32...256) } throws: { error in
                (error as? ConfigurationError)?.key == errorKey
                    && !(error as? ConfigurationError).map { "\($0)".contains(Self.value) }!
            }
        } else {
            #expect(try reader.secret("KINDRED_X_SECRET", length: 32...256) == expected)
        }
    }

    @Test("a file that cannot be read stops the start naming the _FILE key")
    func unreadable() {
        let reader = EnvironmentReader(["KINDRED_X_SECRET_FILE": "/nonexistent/kindred/secret"])
        #expect { try reader.secret("KINDRED_X_SECRET", length: 32...256) } throws: { error in
            (error as? ConfigurationError)?.key == "KINDRED_X_SECRET_FILE"
        }
    }

    @Test("an optional address that is not host:port is refused, not taken as off")
    func optionalAddress() throws {
        let reader = EnvironmentReader(["KINDRED_X_ADDRESS": "profile-server", "KINDRED_Y_ADDRESS": "off"])
        #expect { try reader.optionalAddress("KINDRED_X_ADDRESS", default: nil) } throws: { error in
            (error as? ConfigurationError)?.key == "KINDRED_X_ADDRESS"
        }
        #expect(try reader.optionalAddress("KINDRED_Y_ADDRESS", default: HostPort("127.0.0.1:1")) == nil)
        #expect(try reader.optionalAddress("KINDRED_Z_ADDRESS", default: HostPort("127.0.0.1:1")) == HostPort("127.0.0.1:1"))
    }

    @Test("a database URL is a secret: _DATABASE_URL_FILE gives it")
    func databaseURL() throws {
        let url = "postgresql://kindred_demo:pw@db.invalid:5432/kindred"
        let settings = try DatabaseSettings(
            server: "demo",
            schema: "demo",
            environment: EnvironmentReader(["KINDRED_DEMO_DATABASE_URL_FILE": try Self.file(url + "\n")])
        )
        #expect(settings.url == url)
    }
}
