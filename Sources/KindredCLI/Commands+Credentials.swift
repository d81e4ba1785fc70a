import ArgumentParser
import KindredProto

/// `kindred change-password`: current, then new password.
struct ChangePassword: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "change-password",
        abstract: "Change the password; other sessions end.",
        discussion: "Prompts for the current and the new password (twice). From stdin: line 1 the current "
            + "password, line 2 the new one."
    )

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            // Fail before asking for passwords when there is no session to use them with.
            _ = try invocation.gateway.storedSession()
            let current = try invocation.prompter.password("current password")
            let new = try invocation.prompter.newPassword()
            let response = try await invocation.gateway.authenticated(
                GatewayClient.API.changePassword,
                .with {
                    $0.currentPassword = current
                    $0.newPassword = new
                }
            )
            Console.out(
                "Password changed; \(response.endedSessions) other session\(response.endedSessions == 1 ? "" : "s") ended."
            )
        }
    }
}

/// `kindred password-reset request|complete`.
struct PasswordReset: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "password-reset",
        abstract: "Reset a forgotten password with a link sent by mail.",
        subcommands: [Request.self, Complete.self]
    )

    /// `kindred password-reset request --email E`.
    struct Request: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Mail a password-reset link.")

        @OptionGroup var global: GlobalOptions
        @Option(help: "The account's email address.") var email: String

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                _ = try await invocation.gateway.call(
                    GatewayClient.API.requestPasswordReset,
                    .with {
                        $0.communityId = invocation.settings.community
                        $0.email = self.email
                    }
                )
                // The same answer for unknown addresses (no account enumeration).
                Console.out("If an account uses \(self.email), a reset link is on its way. Then run:")
                Console.out("  kindred password-reset complete --token TOKEN")
            }
        }
    }

    /// `kindred password-reset complete --token T`: the new password from the terminal or stdin.
    struct Complete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set a new password with the token from the reset link; every session ends.",
            discussion: "The new password is typed twice at a prompt, or read as one line from stdin."
        )

        @OptionGroup var global: GlobalOptions
        @Option(help: "The token from the reset link.") var token: String

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let password = try invocation.prompter.newPassword()
                let response = try await invocation.gateway.call(
                    GatewayClient.API.resetPassword,
                    .with {
                        $0.token = self.token
                        $0.newPassword = password
                    }
                )
                let ended = response.endedSessions
                Console.out(
                    "Password reset; \(ended) session\(ended == 1 ? "" : "s") ended. Sign in with `kindred signin`."
                )
            }
        }
    }
}

/// `kindred delete-account [--yes]`.
struct DeleteAccount: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-account",
        abstract: "Delete the signed-in account and all its data, everywhere.",
        discussion: """
            On a terminal, asks to type the username, then the current password (empty is accepted within 10 \
            minutes of signing in). Without a terminal, needs --yes and reads the password as one line from stdin \
            (an empty line for none).
            """
    )

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Do not ask for confirmation.") var yes = false

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let session = try invocation.gateway.storedSession()
            try invocation.prompter.confirm(
                "This deletes \(session.username) and all its data for good.",
                typing: session.username,
                assumeYes: self.yes
            )
            let password = try invocation.prompter.password(
                invocation.prompter.isTerminal
                    ? "current password (empty if you signed in within 10 minutes)" : "current password"
            )
            _ = try await invocation.gateway.authenticated(
                GatewayClient.API.deleteAccount,
                .with { $0.currentPassword = password }
            )
            try invocation.store.remove()
            Console.out(
                "Deleted account \(session.username) (user \(session.userId)); its data is being erased everywhere."
            )
        }
    }
}
