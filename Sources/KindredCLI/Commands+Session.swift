import ArgumentParser
import Foundation
import KindredGRPC
import KindredProto

/// `kindred signin LOGIN`: signs in with a password and stores the session.
struct SignIn: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signin",
        abstract: "Sign in and keep the session in the config directory.",
        discussion: "The password is typed at a prompt, or read as one line from stdin. Signing in replaces "
            + "(and ends) the session stored before."
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: "Email address or username.") var login: String
    @Option(
        help: ArgumentHelp(
            "Device name shown in `kindred sessions` (default: kindred on <host name>).",
            valueName: "name"
        )
    )
    var deviceName: String?

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let password = try invocation.prompter.password("password")
            let client = Kindred.Api.V1.ClientInfo.with {
                $0.deviceName = String((self.deviceName ?? Self.defaultDeviceName).prefix(64))
                $0.userAgent = "kindred-cli"
            }
            let (session, _) = try await invocation.gateway.signIn(
                login: self.login,
                password: password,
                client: client
            )
            Console.out(Render.signedIn(session))
        }
    }

    static var defaultDeviceName: String {
        let host = ProcessInfo.processInfo.hostName
        return host.isEmpty ? "kindred" : "kindred on \(host)"
    }
}

/// `kindred whoami [--json]`: GetAccount.
struct WhoAmI: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "whoami", abstract: "Show the signed-in account.")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print the account as JSON (proto field names; enums by name; times in *_unix_ms).") var json = false

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let response = try await invocation.gateway.authenticated(GatewayClient.API.getAccount, .init())
            guard let account = response.account else {
                throw RPCError(.internalError, "The gateway answered without the account")
            }
            let session = try? invocation.store.load()
            if self.json {
                Console.out(Render.json(account, session: session))
            } else {
                Render.account(account, session: session).forEach(Console.out)
            }
        }
    }
}

/// `kindred signout`: ends the session on the server and removes it here, even when the server call fails.
struct SignOut: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signout",
        abstract: "End this session and remove it from the config directory.",
        discussion: "The local session is removed even when the gateway cannot be told; the exit status then "
            + "reports the failed call."
    )

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let session: StoredSession
            do {
                session = try invocation.gateway.storedSession()
            } catch let error as CLIError where error.isUnreadableSession {
                // Nothing to tell the server without the tokens; do not leave the user stuck with the file.
                try invocation.store.remove()
                Console.out("Removed the unreadable session file \(invocation.store.path).")
                return
            }
            do {
                try await invocation.gateway.signOut(session)
            } catch {
                let exitCode = invocation.report(error)
                try invocation.store.remove()
                Console.error("Removed the local session anyway; on the server it stays valid until it expires.")
                throw exitCode
            }
            try invocation.store.remove()
            Console.out("Signed out \(session.username) (session \(session.sessionId)).")
        }
    }
}

/// `kindred signout-everywhere [--keep-current]`.
struct SignOutEverywhere: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signout-everywhere",
        abstract: "End all sessions of the account (on every device)."
    )

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Keep this session.") var keepCurrent = false

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let response = try await invocation.gateway.authenticated(
                GatewayClient.API.signOutEverywhere,
                .with { $0.keepCurrent = self.keepCurrent }
            )
            Console.out("Ended \(response.endedSessions) session\(response.endedSessions == 1 ? "" : "s").")
            if !self.keepCurrent {
                try invocation.store.remove()
                Console.out("This session ended too; sign in again with `kindred signin`.")
            }
        }
    }
}

/// `kindred sessions [--json]`: every page of ListSessions.
struct Sessions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the account's sessions, most recently used first.")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print JSON: {\"sessions\": [...]} with proto field names.") var json = false

    /// A bound on pages, so a server that keeps handing out page tokens cannot keep the CLI busy forever.
    static let maximumPages = 100

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            var sessions: [Kindred.Api.V1.Session] = []
            var pageToken = ""
            for _ in 0..<Self.maximumPages {
                let response = try await invocation.gateway.authenticated(
                    GatewayClient.API.listSessions,
                    .with {
                        $0.pageSize = 100
                        $0.pageToken = pageToken
                    }
                )
                sessions += response.sessions
                pageToken = response.nextPageToken
                if pageToken.isEmpty { break }
            }
            if self.json {
                Console.out(Render.json(sessions))
            } else {
                Render.sessions(sessions).forEach(Console.out)
            }
        }
    }
}

/// `kindred revoke-session ID`.
struct RevokeSession: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke-session",
        abstract: "End one session of the account (see `kindred sessions`)."
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The session id.") var sessionId: String

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let current = try invocation.gateway.storedSession()
            _ = try await invocation.gateway.authenticated(
                GatewayClient.API.revokeSession,
                .with { $0.sessionId = self.sessionId }
            )
            Console.out("Ended session \(self.sessionId).")
            if current.sessionId == self.sessionId {
                try invocation.store.remove()
                Console.out("That was this session; sign in again with `kindred signin`.")
            }
        }
    }
}
