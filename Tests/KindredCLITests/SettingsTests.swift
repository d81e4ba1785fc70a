import ArgumentParser
import Testing

@testable import KindredCLI

@Suite struct SettingsTests {
    private func options(_ arguments: [String] = []) throws -> GlobalOptions {
        try GlobalOptions.parse(arguments)
    }

    @Test(arguments: [
        ("127.0.0.1:50050", "127.0.0.1", 50050), ("gw.example.com:443", "gw.example.com", 443),
        ("[::1]:9000", "::1", 9000), ("localhost", "localhost", 50050), ("[fe80::1]", "fe80::1", 50050),
    ])
    func addresses(text: String, host: String, port: Int) throws {
        let parsed = try #require(GatewayTarget.parseAddress(text))
        #expect(parsed.host == host)
        #expect(parsed.port == port)
    }

    @Test func ipv6AddressesGetBrackets() {
        #expect(GatewayTarget(host: "::1", port: 9000).address == "[::1]:9000")
    }

    @Test func defaults() throws {
        let settings = try Settings.resolve(self.options(), environment: [:], session: nil)
        #expect(settings.target == GatewayTarget(host: "127.0.0.1", port: 50050, tls: false))
        #expect(settings.community == "demo")
        #expect(settings.timeout == .seconds(10))
    }

    @Test func flagsBeatEnvironmentBeatsSession() throws {
        var session = storedSession(accessExpires: 1)
        session.gateway = "session.example:1"
        session.community = "sessions"
        let environment = ["KINDRED_GATEWAY": "env.example:2", "KINDRED_COMMUNITY": "env-community"]

        let fromSession = try Settings.resolve(self.options(), environment: [:], session: session)
        #expect(fromSession.target.address == "session.example:1")
        #expect(fromSession.community == "sessions")

        let fromEnvironment = try Settings.resolve(self.options(), environment: environment, session: session)
        #expect(fromEnvironment.target.address == "env.example:2")
        #expect(fromEnvironment.community == "env-community")

        let fromFlags = try Settings.resolve(
            self.options(["--gateway", "flag.example:3", "--community", "flags"]),
            environment: environment,
            session: session
        )
        #expect(fromFlags.target.address == "flag.example:3")
        #expect(fromFlags.community == "flags")
    }

    @Test func tlsFollowsTheSessionForItsAddress() throws {
        var session = storedSession(accessExpires: 1)
        session.gateway = "gw.example:443"
        session.tls = true
        session.caFile = "/ca.pem"
        let same = try Settings.resolve(
            self.options(["--gateway", "gw.example:443"]),
            environment: [:],
            session: session
        )
        #expect(same.target.tls)
        #expect(same.target.caFile == "/ca.pem")
        let other = try Settings.resolve(
            self.options(["--gateway", "other.example:443"]),
            environment: [:],
            session: session
        )
        #expect(!other.target.tls)
        let explicit = try Settings.resolve(self.options(["--ca-file", "/other.pem"]), environment: [:], session: nil)
        #expect(explicit.target.tls)
        #expect(explicit.target.caFile == "/other.pem")
        let relative = try Settings.resolve(
            self.options(["--ca-file", "certs/ca.pem"]),
            environment: [:],
            session: nil,
            workingDirectory: "/work"
        )
        #expect(relative.target.caFile == "/work/certs/ca.pem")
    }

    @Test func badEnvironmentIsAUsageError() throws {
        #expect(throws: CLIError.self) {
            try Settings.resolve(self.options(), environment: ["KINDRED_GATEWAY": "a:b:c"], session: nil)
        }
        #expect(throws: CLIError.self) {
            try Settings.resolve(self.options(), environment: ["KINDRED_COMMUNITY": "No Spaces"], session: nil)
        }
    }

    @Test func configDirectory() throws {
        let options = try self.options()
        #expect(try Settings.configDirectory(options, environment: ["HOME": "/home/a"]) == "/home/a/.config/kindred")
        #expect(
            try Settings.configDirectory(options, environment: ["HOME": "/home/a", "XDG_CONFIG_HOME": "/xdg"])
                == "/xdg/kindred"
        )
        // Relative XDG values are ignored, as the spec says.
        #expect(
            try Settings.configDirectory(options, environment: ["HOME": "/home/a", "XDG_CONFIG_HOME": "xdg"])
                == "/home/a/.config/kindred"
        )
        #expect(
            try Settings.configDirectory(options, environment: ["KINDRED_CONFIG_DIR": "/k", "XDG_CONFIG_HOME": "/xdg"])
                == "/k"
        )
        #expect(
            try Settings.configDirectory(
                self.options(["--config-dir", "/flag"]),
                environment: ["KINDRED_CONFIG_DIR": "/k"]
            )
                == "/flag"
        )
        #expect(throws: CLIError.self) { try Settings.configDirectory(options, environment: [:]) }
    }
}
