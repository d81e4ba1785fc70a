import ArgumentParser
import Testing

@testable import KindredCLI

@Suite struct CommandParsingTests {
    private func parse<Command: ParsableCommand>(_ arguments: [String], as type: Command.Type) throws -> Command {
        let command = try KindredCommand.parseAsRoot(arguments)
        return try #require(command as? Command)
    }

    private func expectUsageError(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            _ = try KindredCommand.parseAsRoot(arguments)
            Issue.record("\(arguments) parsed", sourceLocation: sourceLocation)
        } catch {
            #expect(KindredCommand.exitCode(for: error) == .validationFailure, sourceLocation: sourceLocation)
        }
    }

    @Test func globalOptions() throws {
        let command = try self.parse(
            [
                "whoami", "--gateway", "gw.example:443", "--ca-file", "/ca.pem", "--community", "dogs", "--timeout",
                "2.5",
                "--config-dir", "/tmp/k", "--json",
            ],
            as: WhoAmI.self
        )
        #expect(command.global.gateway == "gw.example:443")
        #expect(command.global.caFile == "/ca.pem")
        #expect(command.global.tls == false)
        #expect(command.global.community == "dogs")
        #expect(command.global.timeout == 2.5)
        #expect(command.global.configDir == "/tmp/k")
        #expect(command.json)
    }

    @Test func defaults() throws {
        let command = try self.parse(["sessions"], as: Sessions.self)
        #expect(command.global.gateway == nil)
        #expect(command.global.tls == false)
        #expect(command.global.community == nil)
        #expect(command.global.timeout == 10)
        #expect(command.json == false)
    }

    @Test func signup() throws {
        let command = try self.parse(
            ["signup", "--email", "a@example.com", "--username", "alice", "--locale", "de"],
            as: SignUp.self
        )
        #expect(command.email == "a@example.com")
        #expect(command.username == "alice")
        #expect(command.locale == "de")
        self.expectUsageError(["signup", "--email", "a@example.com"])
        // Passwords are never options.
        self.expectUsageError(["signup", "--email", "a@example.com", "--username", "alice", "--password", "x"])
    }

    @Test func verify() throws {
        let byCode = try self.parse(["verify", "--email", "a@example.com", "--code", "123456"], as: Verify.self)
        #expect(byCode.email == "a@example.com")
        #expect(byCode.code == "123456")
        let byToken = try self.parse(["verify", "--token", "tok"], as: Verify.self)
        #expect(byToken.token == "tok")
        self.expectUsageError(["verify"])
        self.expectUsageError(["verify", "--code", "123456"])
        self.expectUsageError(["verify", "--email", "a@example.com"])
        self.expectUsageError(["verify", "--token", "tok", "--code", "123456"])
    }

    @Test func resendVerification() throws {
        let command = try self.parse(["resend-verification", "--email", "a@example.com"], as: ResendVerification.self)
        #expect(command.email == "a@example.com")
        self.expectUsageError(["resend-verification"])
    }

    @Test func signin() throws {
        let command = try self.parse(["signin", "alice", "--device-name", "laptop"], as: SignIn.self)
        #expect(command.login == "alice")
        #expect(command.deviceName == "laptop")
        self.expectUsageError(["signin"])
        self.expectUsageError(["signin", "alice", "hunter2"])
    }

    @Test func sessionCommands() throws {
        _ = try self.parse(["signout"], as: SignOut.self)
        #expect(try self.parse(["signout-everywhere"], as: SignOutEverywhere.self).keepCurrent == false)
        #expect(try self.parse(["signout-everywhere", "--keep-current"], as: SignOutEverywhere.self).keepCurrent)
        #expect(try self.parse(["sessions", "--json"], as: Sessions.self).json)
        #expect(try self.parse(["revoke-session", "0192abcd"], as: RevokeSession.self).sessionId == "0192abcd")
        self.expectUsageError(["revoke-session"])
    }

    @Test func credentialCommands() throws {
        _ = try self.parse(["change-password"], as: ChangePassword.self)
        #expect(
            try self.parse(["password-reset", "request", "--email", "a@example.com"], as: PasswordReset.Request.self)
                .email == "a@example.com"
        )
        #expect(
            try self.parse(["password-reset", "complete", "--token", "tok"], as: PasswordReset.Complete.self).token
                == "tok"
        )
        self.expectUsageError(["password-reset", "complete"])
        #expect(try self.parse(["delete-account"], as: DeleteAccount.self).yes == false)
        #expect(try self.parse(["delete-account", "--yes"], as: DeleteAccount.self).yes)
    }

    @Test func checkUsername() throws {
        let command = try self.parse(["check-username", "alice", "--json"], as: CheckUsername.self)
        #expect(command.username == "alice")
        #expect(command.json)
    }

    @Test(arguments: [
        ["whoami", "--timeout", "0"], ["whoami", "--timeout", "-1"], ["whoami", "--gateway", "host:99999"],
        ["whoami", "--gateway", "::1:50050"], ["whoami", "--gateway", ""], ["whoami", "--community", "Demo"],
        ["whoami", "--community", "x"], ["nonsense"],
    ])
    func invalidGlobalOptions(arguments: [String]) {
        self.expectUsageError(arguments)
    }

    @Test func workout() throws {
        let start = try #require(
            try KindredCommand.parseAsRoot(["workout", "start", "--activity", "running"]) as? WorkoutCommand.Start)
        #expect(start.activity == "running")
        #expect((try KindredCommand.parseAsRoot(["workout", "start"]) as? WorkoutCommand.Start)?.activity == "")
        #expect(try KindredCommand.parseAsRoot(["workout", "stop"]) is WorkoutCommand.Stop)
        let set = try #require(
            try KindredCommand.parseAsRoot(["notifications", "set", "--activities", "off"]) as? NotificationsCommand.Set)
        #expect(set.activities == .off)
    }
}
