import KindredGRPC
import Testing

@Suite("HTTPS origins")
struct HTTPSOriginTests {
    @Test("https://host[:port] parses; the port defaults to 443")
    func parses() throws {
        let apple = try HTTPSOrigin("https://api.push.apple.com")
        #expect(apple.host == "api.push.apple.com" && apple.port == 443)
        let local = try HTTPSOrigin("https://127.0.0.1:8443/")
        #expect(local.host == "127.0.0.1" && local.port == 8443)
        let v6 = try HTTPSOrigin("https://[::1]:9000")
        #expect(v6.host == "::1" && v6.port == 9000)
        let split = try HTTPSOrigin.split("https://oauth2.googleapis.com/token")
        #expect(split.origin.host == "oauth2.googleapis.com" && split.origin.port == 443)
        #expect(split.path == "/token")
    }

    @Test("other schemes, paths, user info and bad ports are refused", arguments: [
        "http://api.push.apple.com", "https://", "https://host/path", "https://user@host", "https://host:0",
        "https://host:70000", "https://host:x", "api.push.apple.com",
    ])
    func refuses(_ text: String) {
        #expect(throws: HTTPSOriginError.self) { try HTTPSOrigin(text) }
    }
}
