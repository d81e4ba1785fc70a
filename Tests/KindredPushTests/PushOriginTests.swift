import Testing

@testable import KindredPush

@Suite("Provider origins")
struct PushOriginTests {
    @Test("https://host[:port] parses; the port defaults to 443")
    func parses() throws {
        let apple = try PushOrigin("https://api.push.apple.com", setting: "x")
        #expect(apple.host == "api.push.apple.com" && apple.port == 443)
        let local = try PushOrigin("https://127.0.0.1:8443/", setting: "x")
        #expect(local.host == "127.0.0.1" && local.port == 8443)
        let v6 = try PushOrigin("https://[::1]:9000", setting: "x")
        #expect(v6.host == "::1" && v6.port == 9000)
        let split = try PushOrigin.split("https://oauth2.googleapis.com/token", setting: "x")
        #expect(split.origin.host == "oauth2.googleapis.com" && split.origin.port == 443)
        #expect(split.path == "/token")
    }

    @Test("other schemes, paths, user info and bad ports are refused", arguments: [
        "http://api.push.apple.com", "https://", "https://host/path", "https://user@host", "https://host:0",
        "https://host:70000", "https://host:x", "api.push.apple.com",
    ])
    func refuses(_ text: String) {
        #expect(throws: PushConfigurationError.self) { try PushOrigin(text, setting: "x") }
    }
}
