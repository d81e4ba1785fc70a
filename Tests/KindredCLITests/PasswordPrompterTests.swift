import Synchronization
import Testing

@testable import KindredCLI

@Suite struct PasswordPrompterTests {
    /// A prompter over scripted input lines; records the prompts and whether each was hidden.
    final class Script: Sendable {
        let lines: Mutex<[String]>
        let prompts = Mutex<[(String, Bool)]>([])

        init(_ lines: [String]) {
            self.lines = Mutex(lines)
        }

        func prompter(terminal: Bool) -> PasswordPrompter {
            PasswordPrompter(isTerminal: terminal) { prompt, hidden in
                self.prompts.withLock { $0.append((prompt, hidden)) }
                return self.lines.withLock { $0.isEmpty ? nil : $0.removeFirst() }
            }
        }
    }

    @Test func pipedInputIsOneLinePerPasswordWithoutConfirmation() throws {
        let script = Script(["old secret", "new secret"])
        let prompter = script.prompter(terminal: false)
        #expect(try prompter.password("current password") == "old secret")
        #expect(try prompter.newPassword() == "new secret")
        #expect(script.prompts.withLock { $0.count } == 2)
    }

    @Test func endOfInputIsAnError() {
        let prompter = Script([]).prompter(terminal: false)
        #expect(throws: CLIError.self) { try prompter.password("password") }
    }

    @Test func terminalAsksTwiceForNewPasswordsWithoutEcho() throws {
        let script = Script(["s3cret pass", "s3cret pass"])
        #expect(try script.prompter(terminal: true).newPassword("password") == "s3cret pass")
        let prompts = script.prompts.withLock { $0 }
        #expect(prompts.map(\.0) == ["Password: ", "Repeat the password: "])
        #expect(prompts.allSatisfy { $0.1 })
    }

    @Test func mismatchedConfirmationFails() {
        let prompter = Script(["s3cret pass", "s3cret pas"]).prompter(terminal: true)
        #expect(throws: CLIError.input("the passwords do not match; nothing was changed")) {
            try prompter.newPassword()
        }
    }

    @Test func confirmation() throws {
        try Script(["alice"]).prompter(terminal: true).confirm("Sure?", typing: "alice", assumeYes: false)
        try Script([]).prompter(terminal: false).confirm("Sure?", typing: "alice", assumeYes: true)
        #expect(throws: CLIError.self) {
            try Script(["bob"]).prompter(terminal: true).confirm("Sure?", typing: "alice", assumeYes: false)
        }
        // Without a terminal only --yes confirms.
        #expect(throws: CLIError.self) {
            try Script(["alice"]).prompter(terminal: false).confirm("Sure?", typing: "alice", assumeYes: false)
        }
    }
}
