import Foundation
import KindredProto
import Testing

@testable import KindredCLI

@Suite struct RenderTests {
    @Test(arguments: [
        (Int64(0), "-"), (1_700_000_000_000, "2023-11-14 22:13 UTC"), (86_400_000, "1970-01-02 00:00 UTC"),
    ])
    func times(unixMs: Int64, text: String) {
        #expect(Render.time(unixMs) == text)
    }

    @Test func signedInLine() {
        let session = storedSession(accessExpires: 1)
        #expect(
            Render.signedIn(session)
                == "Signed in as alice (user 0192bbbb-0000-7000-8000-000000000002) — session 0192aaaa-0000-7000-8000-000000000001"
        )
    }

    @Test func accountJSONUsesProtoNames() throws {
        let account = Kindred.Api.V1.Account.with {
            $0.userId = "u1"
            $0.communityId = "demo"
            $0.email = "a@example.com"
            $0.emailVerified = true
            $0.username = "alice"
            $0.roles = [.user, .admin]
            $0.status = .active
            $0.passwordSet = true
            $0.createdUnixMs = 1_700_000_000_000
        }
        let json = Render.json(account, session: storedSession(accessExpires: 1))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["user_id"] as? String == "u1")
        #expect(object["email_verified"] as? Bool == true)
        #expect(object["roles"] as? [String] == ["ROLE_USER", "ROLE_ADMIN"])
        #expect(object["status"] as? String == "ACCOUNT_STATUS_ACTIVE")
        #expect(object["created_unix_ms"] as? Int == 1_700_000_000_000)
        #expect(object["session_id"] as? String == "0192aaaa-0000-7000-8000-000000000001")
    }

    @Test func sessionsTableAndJSON() throws {
        let sessions: [Kindred.Api.V1.Session] = [
            .with {
                $0.sessionId = "s1"
                $0.signInMethod = .password
                $0.deviceName = "kindred on laptop"
                $0.current = true
                $0.lastUsedUnixMs = 1_700_000_000_000
            },
            .with {
                $0.sessionId = "s2"
                $0.signInMethod = .google
            },
        ]
        let lines = Render.sessions(sessions)
        #expect(lines.count == 4)
        #expect(lines[1].hasPrefix("*  s1"))
        #expect(lines[1].contains("password"))
        #expect(lines[2].contains("google"))
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(Render.json(sessions).utf8)) as? [String: [[String: Any]]]
        )
        #expect(object["sessions"]?.map { $0["session_id"] as? String } == ["s1", "s2"])
        #expect(object["sessions"]?.first?["sign_in_method"] as? String == "SIGN_IN_METHOD_PASSWORD")
        #expect(object["sessions"]?.first?["current"] as? Bool == true)
        #expect(Render.sessions([]) == ["No sessions."])
    }
}
