import ArgumentParser
import KindredProto

/// `kindred signup --email E --username U`: creates an account; the password is read from the terminal or stdin.
struct SignUp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signup",
        abstract: "Create an account (then confirm the email with `kindred verify`).",
        discussion: "The password (8..128 characters) is typed twice at a prompt, or read as one line from stdin."
    )

    @OptionGroup var global: GlobalOptions
    @Option(help: "Email address; the verification code is sent there.") var email: String
    @Option(help: "Username, 3..30 characters of a-z, 0-9, _ and .") var username: String
    @Option(help: ArgumentHelp("Language of the emails (BCP 47, e.g. de); default en.", valueName: "tag"))
    var locale: String?

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let password = try invocation.prompter.newPassword("password")
            let response = try await invocation.gateway.call(
                GatewayClient.API.signUp,
                .with {
                    $0.communityId = invocation.settings.community
                    $0.email = self.email
                    $0.username = self.username
                    $0.password = password
                    $0.locale = self.locale ?? ""
                }
            )
            // The same answer whether or not the address was registered before (no account enumeration).
            Console.out("Sign-up accepted. Check \(self.email) for a 6-digit code, then run:")
            Console.out("  kindred verify --email \(self.email) --code CODE")
            if response.resendAfterSeconds > 0 {
                Console.out(
                    "No mail? `kindred resend-verification --email \(self.email)` in \(response.resendAfterSeconds) s."
                )
            }
        }
    }
}

/// `kindred verify --email E --code C` or `kindred verify --token T`.
struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Confirm an email address with the code or the link token from the mail.",
        usage: """
            kindred verify --email <email> --code <code> [<options>]
            kindred verify --token <token> [<options>]
            """
    )

    @OptionGroup var global: GlobalOptions
    @Option(help: "The address the code was sent to (with --code).") var email: String?
    @Option(help: "The 6-digit code from the mail.") var code: String?
    @Option(help: "The token from the link in the mail (instead of --email and --code).") var token: String?

    func validate() throws {
        switch (self.token, self.email, self.code) {
        case (.some, nil, nil), (nil, .some, .some): return
        case (.some, _, _): throw ValidationError("give either --token, or --email and --code")
        default: throw ValidationError("give --email and --code (or --token)")
        }
    }

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let request = Kindred.Api.V1.VerifyEmailRequest.with { request in
                if let token = self.token {
                    request.proof = .token(token)
                } else {
                    request.proof = .code(
                        .with {
                            $0.communityId = invocation.settings.community
                            $0.email = self.email ?? ""
                            $0.code = self.code?.trimmingSpaces ?? ""
                        }
                    )
                }
            }
            let response = try await invocation.gateway.call(GatewayClient.API.verifyEmail, request)
            Console.out("Email \(response.email) verified. Sign in with: kindred signin \(response.email)")
        }
    }
}

/// `kindred resend-verification --email E`.
struct ResendVerification: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resend-verification",
        abstract: "Send the verification mail again."
    )

    @OptionGroup var global: GlobalOptions
    @Option(help: "The address that waits for verification.") var email: String

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let response = try await invocation.gateway.call(
                GatewayClient.API.resendVerification,
                .with {
                    $0.communityId = invocation.settings.community
                    $0.email = self.email
                }
            )
            var line = "If \(self.email) waits for verification, a new code is on its way."
            if response.resendAfterSeconds > 0 { line += " Next resend possible in \(response.resendAfterSeconds) s." }
            Console.out(line)
        }
    }
}

/// `kindred check-username NAME [--json]`.
struct CheckUsername: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-username",
        abstract: "Tell whether a username is free (exit status 0 either way)."
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The username to check.") var username: String
    @Flag(help: "Print JSON (available, normalized_username, unavailable_reason).") var json = false

    struct Answer: Encodable {
        var available: Bool
        var normalizedUsername: String
        var unavailableReason: String
    }

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let response = try await invocation.gateway.call(
                GatewayClient.API.checkUsername,
                .with {
                    $0.communityId = invocation.settings.community
                    $0.username = self.username
                }
            )
            if self.json {
                Console.out(
                    Render.encode(
                        Answer(
                            available: response.available,
                            normalizedUsername: response.normalizedUsername,
                            unavailableReason: response.unavailableReason
                        )
                    )
                )
            } else if response.available {
                Console.out("\(response.normalizedUsername) is available")
            } else {
                let reason = response.unavailableReason.isEmpty ? "" : " (\(response.unavailableReason))"
                Console.out("\(self.username) is not available\(reason)")
            }
        }
    }
}
