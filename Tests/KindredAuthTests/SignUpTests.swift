import Foundation
import KindredGRPC
import KindredProto
import Testing

@testable import KindredAuth

@Suite("SignUp, VerifyEmail and the mail relay")
struct SignUpTests {
    @Test func signUpVerifySignIn() async throws {
        try await AuthHarness.with { auth in
            let email = AuthHarness.uniqueEmail()
            let username = AuthHarness.uniqueUsername()
            // Upper-case domain and local part, surrounding spaces: normalised.
            let response = try await auth.signUp(
                email: "  " + email.uppercased() + " ",
                username: username.uppercased()
            )
            #expect(response.resendAfterSeconds == 60)
            let mail = try await auth.mails(to: email)[0]
            #expect(mail.subject == "Confirm your email address")
            let token = try #require(mail.token)
            #expect(token.count >= 22)  // >= 128 bits in base64url
            // Unverified accounts cannot sign in, even with the right password.
            await expectRPCError(.failedPrecondition, reason: "EMAIL_NOT_VERIFIED") {
                _ = try await auth.signIn(login: email)
            }
            let verified = try await auth.verify(token: token)
            #expect(verified.email == email)
            // Repeating with the used token of a verified account is fine.
            _ = try await auth.verify(token: token)
            let signedIn = try await auth.signIn(login: username)
            #expect(signedIn.account?.email == email)
            #expect(signedIn.account?.username == username)
            #expect(signedIn.account?.status == .active)
            // The token is stored hashed only.
            let stored = try await auth.database.query(
                "SELECT count(*) FROM email_tokens WHERE token_hash = \(Array(token.utf8))"
            )
            #expect(try stored.scalar(Int64.self) == 0)
        }
    }

    @Test func verifyWithCode() async throws {
        try await AuthHarness.with { auth in
            let email = AuthHarness.uniqueEmail()
            try await auth.signUp(email: email, username: AuthHarness.uniqueUsername())
            let mail = try await auth.mails(to: email)[0]
            let code = try #require(mail.code)
            var request = Kindred.Auth.V1.VerifyEmailRequest()
            var proof = Kindred.Auth.V1.EmailCode()
            proof.communityId = auth.community
            proof.email = email
            proof.code = code == "000000" ? "111111" : "000000"
            request.proof = .code(proof)
            await expectRPCError(.failedPrecondition, reason: "TOKEN_EXPIRED") {
                _ = try await auth.call(Auth.verifyEmail, request)
            }
            proof.code = code
            request.proof = .code(proof)
            #expect(try await auth.call(Auth.verifyEmail, request).email == email)
        }
    }

    @Test func existingEmailGetsTheSameAnswerAndANotice() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            auth.clock.advance(seconds: 61)
            let again = try await auth.signUp(
                email: user.email,
                username: AuthHarness.uniqueUsername(),
                password: "another long password"
            )
            #expect(again.resendAfterSeconds == 60)
            let mails = try await auth.mails(to: user.email, count: 2)
            #expect(mails[1].subject == "You already have a Kindred account")
            #expect(mails[1].token == nil)
            let count = try await auth.database.query("SELECT count(*) FROM accounts WHERE email = \(user.email)")
            #expect(try count.scalar(Int64.self) == 1)
        }
    }

    @Test func usernameTakenCaseInsensitively() async throws {
        try await AuthHarness.with { auth in
            let username = AuthHarness.uniqueUsername()
            try await auth.signUp(email: AuthHarness.uniqueEmail(), username: username)
            await expectRPCError(.alreadyExists, reason: "USERNAME_TAKEN") {
                try await auth.signUp(email: AuthHarness.uniqueEmail(), username: username.uppercased())
            }
        }
    }

    @Test(arguments: [
        ("short", "password", "TOO_SHORT"),
        (String(repeating: "a", count: 129), "password", "TOO_LONG"),
        ("baseball", "password", "PASSWORD_TOO_COMMON"),
        ("Password1", "password", "PASSWORD_TOO_COMMON"),
    ])
    func passwordRules(password: String, field: String, reason: String) async throws {
        try await AuthHarness.with { auth in
            let detail = await expectRPCError(.invalidArgument) {
                try await auth.signUp(
                    email: AuthHarness.uniqueEmail(),
                    username: AuthHarness.uniqueUsername(),
                    password: password
                )
            }
            #expect(detail?.fieldViolations.first?.field == field)
            #expect(detail?.fieldViolations.first?.reason == reason)
        }
    }

    /// The reason `check` refuses with, or "OK".
    static func reason(_ check: () throws -> Void) -> String {
        do {
            try check()
            return "OK"
        } catch let error as AuthError {
            return error.violations.first?.reason ?? "?"
        } catch {
            return "?"
        }
    }

    @Test func textHasByteCapsAndNamesRefuseInvisibleCharacters() {
        let common = CommonPasswords(entries: [])
        let tower = "password" + String(repeating: "\u{0301}", count: 600)  // 8 characters, 1,208 bytes
        #expect(Self.reason { try Validation.newPassword(tower, field: "p", common: common) } == "TOO_MANY_BYTES")
        #expect(Self.reason { try Validation.presentedPassword(tower, field: "p") } == "TOO_MANY_BYTES")
        #expect(Self.reason { _ = try Validation.username("ada\u{200B}x") } == "FORBIDDEN_CHARACTER")
        #expect(Self.reason { _ = try Validation.username("ada\u{202E}x") } == "FORBIDDEN_CHARACTER")
        #expect(Self.reason { _ = try Validation.username(String(repeating: "é", count: 16)) } == "TOO_MANY_BYTES")
        #expect(Self.reason { _ = try Validation.username("ada_lovelace") } == "OK")
        #expect(Self.reason { _ = try Validation.email(String(repeating: "é", count: 130) + "@example.com") } == "TOO_LONG")
    }

    @Test func passwordLengthCountsCharactersAndNeverTruncates() async throws {
        // 8 emoji = 8 characters (32 bytes): accepted; 128 multi-byte characters accepted, 129 refused.
        #expect(throws: Never.self) { try Validation.newPassword("🐶🐱🐭🐹🐰🦊🐻🐼", field: "p", common: .init(entries: [])) }
        #expect(throws: Never.self) {
            try Validation.newPassword(String(repeating: "é", count: 128), field: "p", common: .init(entries: []))
        }
        #expect(throws: AuthError.self) {
            try Validation.newPassword(String(repeating: "é", count: 129), field: "p", common: .init(entries: []))
        }
        try await AuthHarness.with { auth in
            let long = String(repeating: "ü", count: 100) + "-end-A"
            let user = try await auth.activeUser(password: long)
            // A prefix of the password is not the password.
            await expectRPCError(.unauthenticated, reason: "INVALID_CREDENTIALS") {
                _ = try await auth.signIn(login: user.email, password: String(long.dropLast()))
            }
        }
    }

    @Test(arguments: ["ab", "has space", "dot.", ".dot", String(repeating: "x", count: 31), "bad-dash"])
    func usernameFormat(username: String) throws {
        #expect(throws: AuthError.self) { try Validation.username(username) }
    }

    @Test func emailNormalisation() throws {
        #expect(try Validation.email("  Anna.B@Example.COM ") == "anna.b@example.com")
        #expect(throws: AuthError.self) { try Validation.email("no-at-sign") }
        #expect(throws: AuthError.self) { try Validation.email("two@@example.com") }
    }

    @Test func commonListIsBundled() throws {
        let list = try CommonPasswords.bundled()
        #expect(list.count > 9_000)
        #expect(list.contains("PASSWORD"))
        #expect(!list.contains("correct horse battery"))
    }

    @Test func relayRetriesTransientFailuresWithTheSameMessageID() async throws {
        try await AuthHarness.with { auth in
            // The sink answers 450 for this recipient: the row stays queued with a later attempt time.
            let greylisted = "greylisted@example.com"
            try await auth.signUp(email: greylisted, username: AuthHarness.uniqueUsername())
            var attempts: Int32 = 0
            for _ in 0..<400 {
                let rows = try await auth.database.query(
                    "SELECT attempts FROM mail_outbox WHERE recipient_hash = sha256(convert_to(\(greylisted), 'UTF8'))"
                )
                attempts = try rows.first?.decode(Int32.self, at: 0) ?? 0
                if attempts > 0 { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(attempts == 1)
            let pending = try await auth.database.query(
                "SELECT count(*) FROM mail_outbox WHERE recipient = \(greylisted) AND text_body IS NOT NULL AND sent_at IS NULL AND failed_at IS NULL AND next_attempt_at > now()"
            )
            #expect(try pending.scalar(Int64.self) == 1)
            // A sent row keeps its Message-ID derived from the row id.
            let email = AuthHarness.uniqueEmail()
            try await auth.signUp(email: email, username: AuthHarness.uniqueUsername())
            let mail = try await auth.mails(to: email)[0]
            let id = try await auth.database.query(
                "SELECT id FROM mail_outbox WHERE recipient_hash = sha256(convert_to(\(email), 'UTF8'))"
            ).scalar(Int64.self)
            #expect(mail.messageID == "<auth-outbox-\(id)@kindred.invalid>")
            // Marked sent once the batch's transaction commits, just after the server accepted the message.
            var sent = false
            for _ in 0..<400 where !sent {
                sent = try await auth.database.query("SELECT sent_at IS NOT NULL FROM mail_outbox WHERE id = \(id)")
                    .scalar(Bool.self)
                if !sent { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(sent)
        }
    }

    @Test func aCrashBeforeMarkingSentResendsTheIdenticalMail() async throws {
        try await AuthHarness.with { auth in
            // As if the relay died after the SMTP server accepted the mail but before it recorded that: the
            // UPDATE that marks the row sent (and erases its body) fails.
            try await auth.database.execute(
                """
                CREATE FUNCTION refuse_mark_sent() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN RAISE EXCEPTION 'simulated crash'; END $$
                """
            )
            try await auth.database.execute(
                """
                CREATE TRIGGER refuse_mark_sent BEFORE UPDATE OF sent_at ON mail_outbox
                FOR EACH ROW WHEN (NEW.sent_at IS NOT NULL) EXECUTE FUNCTION refuse_mark_sent()
                """
            )
            let email = AuthHarness.uniqueEmail()
            try await auth.signUp(email: email, username: AuthHarness.uniqueUsername())
            let first = try await auth.mails(to: email)[0]
            // The lease would end in 2 minutes; end it now. (The trigger stays: marking keeps failing, which does
            // not matter here, and dropping it could let the first mark succeed after all.)
            var updated = 0
            for _ in 0..<400 where updated == 0 {
                updated = try await auth.database.execute(
                    "UPDATE mail_outbox SET next_attempt_at = now() WHERE recipient = \(email) AND sent_at IS NULL"
                )
                if updated == 0 { try await Task.sleep(for: .milliseconds(50)) }
            }
            let mails = try await auth.mails(to: email, count: 2)
            #expect(mails[1].messageID == first.messageID)
            #expect(mails[1].text == first.text)
        }
    }

    @Test func signUpIsRateLimitedPerAddress() async throws {
        try await AuthHarness.with { auth in
            let email = AuthHarness.uniqueEmail()
            try await auth.signUp(email: email, username: AuthHarness.uniqueUsername())
            let detail = await expectRPCError(.resourceExhausted, reason: "RATE_LIMITED") {
                try await auth.signUp(email: email, username: AuthHarness.uniqueUsername())
            }
            #expect((detail?.retryAfterMs ?? 0) > 0)
        }
    }
}
