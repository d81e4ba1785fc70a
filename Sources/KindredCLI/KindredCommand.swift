import ArgumentParser
import Foundation

/// `kindred`: the command-line client of the gateway's public API (kindred.api.v1).
public struct KindredCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "kindred",
        abstract: "The Kindred command-line client: accounts and sessions on a Kindred gateway.",
        discussion: """
            Options go after the command: kindred whoami --gateway 127.0.0.1:50050 --json

            Settings: each comes from its option, else its environment variable, else the signed-in session, else \
            the default.
              --gateway host:port   KINDRED_GATEWAY      default 127.0.0.1:50050
              --tls, --ca-file      (TLS with ALPN h2)   default h2c
              --community slug      KINDRED_COMMUNITY    default demo
              --config-dir path     KINDRED_CONFIG_DIR   default $XDG_CONFIG_HOME/kindred or ~/.config/kindred

            The session (tokens) is kept in session.json in the config directory (mode 0600). Access tokens are \
            refreshed automatically.

            Passwords are never taken from the command line. On a terminal they are typed at a prompt without \
            echo (new passwords twice). Otherwise standard input gives one line per password, in the order the \
            command lists (change-password: current, then new).

            Exit status: 0 success; 1 the gateway refused or failed the call; 2 usage error or unusable local \
            state (not signed in, unreadable session file, missing input); 3 the gateway is unreachable.
            """,
        subcommands: [
            SignUp.self, Verify.self, ResendVerification.self, SignIn.self, WhoAmI.self, SignOut.self,
            SignOutEverywhere.self, Sessions.self, RevokeSession.self, ChangePassword.self, PasswordReset.self,
            CheckUsername.self, DeleteAccount.self, Threads.self, ChatWith.self,
            Like.self, Pass.self, Undo.self, ListMatchesCommand.self, Likes.self, Unmatch.self, Block.self, Unblock.self, Report.self,
            ProfileCommand.self, PhotoCommand.self, LocationCommand.self, CommunityCommand.self, AdminCommand.self,
            DeckCommand.self, Picks.self, Members.self, DevicesCommand.self, NotificationsCommand.self,
            WorkoutCommand.self,
        ]
    )

    public init() {}

    /// Parses the arguments and runs the command, like `AsyncParsableCommand.main()`, but usage errors exit with
    /// status 2 (the documented one) instead of ArgumentParser's 64. (A `main()` of our own would lose overload
    /// resolution to ArgumentParser's synchronous one in `main.swift`.)
    public static func execute(_ arguments: [String]? = nil) async {
        do {
            var command = try Self.parseAsRoot(arguments)
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            if Self.exitCode(for: error) == .validationFailure {
                Console.error(Self.fullMessage(for: error))
                Foundation.exit(ExitStatus.localError.rawValue)
            }
            Self.exit(withError: error)
        }
    }
}

/// What every subcommand does around its work: resolve the settings, open the client, and turn an error
/// into its report on stderr and the exit status.
struct Invocation {
    let gateway: GatewayClient
    let prompter: PasswordPrompter

    var settings: Settings { self.gateway.settings }
    var store: SessionStore { self.gateway.store }

    static func run(_ options: GlobalOptions, _ body: (Invocation) async throws -> Void) async throws {
        let environment = ProcessInfo.processInfo.environment
        var target = GatewayTarget(host: "127.0.0.1", port: 50050)
        do {
            let store = SessionStore(directory: try Settings.configDirectory(options, environment: environment))
            // An unreadable file must not stop sign-up or sign-in; commands that need it report it.
            let settings = try Settings.resolve(options, environment: environment, session: try? store.load())
            target = settings.target
            let transport = try GRPCGatewayTransport(settings: settings)
            let invocation = Invocation(
                gateway: GatewayClient(transport: transport, store: store, settings: settings),
                prompter: .standardInput
            )
            do {
                try await body(invocation)
            } catch {
                await transport.close()
                throw error
            }
            await transport.close()
        } catch let error as ExitCode {
            throw error
        } catch {
            throw Self.report(error, target: target, timeout: .milliseconds(Int64(options.timeout * 1000)))
        }
    }

    /// Prints the report of `error` and returns the exit code to throw.
    static func report(_ error: any Error, target: GatewayTarget, timeout: Duration) -> ExitCode {
        let report = ErrorReport(error, target: target, timeout: timeout)
        report.lines.forEach(Console.error)
        return ExitCode(report.exitStatus.rawValue)
    }

    func report(_ error: any Error) -> ExitCode {
        Self.report(error, target: self.settings.target, timeout: self.settings.timeout)
    }
}
