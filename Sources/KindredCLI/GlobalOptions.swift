import ArgumentParser
import Foundation

/// The options every subcommand takes (`kindred <command> [options]`).
///
/// Each setting comes from its flag, else its environment variable, else the signed-in session (so
/// `kindred whoami` talks to the gateway `kindred signin --gateway ...` used), else the default.
public struct GlobalOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Gateway address (env KINDRED_GATEWAY; default: the signed-in session's, else 127.0.0.1:50050).",
            valueName: "host:port"
        )
    )
    public var gateway: String?

    @Flag(help: "Use TLS with ALPN h2 and the system CA store (default: h2c, plain HTTP/2).")
    public var tls = false

    @Option(
        help: ArgumentHelp(
            "PEM file of the CA that signed the gateway's certificate; implies --tls.",
            valueName: "path"
        )
    )
    public var caFile: String?

    @Option(
        help: ArgumentHelp(
            "Community (app) id (env KINDRED_COMMUNITY; default: the session's, else demo).",
            valueName: "slug"
        )
    )
    public var community: String?

    @Option(help: ArgumentHelp("Deadline of each call, in seconds.", valueName: "seconds"))
    public var timeout: Double = 10

    @Option(
        help: ArgumentHelp(
            "Where session.json is kept (env KINDRED_CONFIG_DIR; default $XDG_CONFIG_HOME/kindred or ~/.config/kindred).",
            valueName: "path"
        )
    )
    public var configDir: String?

    public init() {}

    public func validate() throws {
        guard self.timeout > 0, self.timeout <= 3600 else {
            throw ValidationError("--timeout must be in 0 < seconds <= 3600")
        }
        if let gateway = self.gateway, GatewayTarget.parseAddress(gateway) == nil {
            throw ValidationError("--gateway must be host:port, e.g. 127.0.0.1:50050 or [::1]:50050")
        }
        if let community = self.community, !Settings.isCommunitySlug(community) {
            throw ValidationError("--community must be 2..32 characters of a-z, 0-9 and -")
        }
    }
}

/// Where the CLI sends its calls.
public struct GatewayTarget: Hashable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// TLS with ALPN h2 when true; h2c (HTTP/2 with prior knowledge) otherwise.
    public var tls: Bool
    /// The CA file that must have signed the gateway's certificate; the system store when nil.
    public var caFile: String?

    public static let defaultAddress = "127.0.0.1:50050"

    public init(host: String, port: Int, tls: Bool = false, caFile: String? = nil) {
        self.host = host
        self.port = port
        self.tls = tls
        self.caFile = caFile
    }

    /// `host:port`, with IPv6 hosts in brackets.
    public var address: String { self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)" }

    public var description: String { self.address }

    /// Parses `host:port`, `[v6]:port`, or a bare host (port 50050).
    public static func parseAddress(_ text: String) -> (host: String, port: Int)? {
        var host: Substring
        var port: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                port = rest.dropFirst()
            }
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            port = text[text.index(after: colon)...]
            guard !host.contains(":") else { return nil }  // an IPv6 address needs brackets
        } else {
            host = Substring(text)
        }
        let number = port.map { Int($0) } ?? 50050
        guard !host.isEmpty, !host.contains(where: { $0 == " " || $0 == "/" }), let number, (1...65535).contains(number)
        else { return nil }
        return (String(host), number)
    }
}

/// The settings a command runs with, resolved from flags, environment and the stored session.
public struct Settings: Hashable, Sendable {
    public var target: GatewayTarget
    public var community: String
    public var timeout: Duration

    public static let defaultCommunity = "demo"

    /// Resolves the settings: flag, then environment variable, then the signed-in `session`, then the default.
    /// TLS comes from --tls/--ca-file, or from the session when the address is the session's.
    /// A relative --ca-file is made absolute against `workingDirectory`: the session keeps it for later commands.
    public static func resolve(
        _ options: GlobalOptions,
        environment: [String: String],
        session: StoredSession?,
        workingDirectory: String = FileManager.default.currentDirectoryPath
    ) throws(CLIError) -> Settings {
        let addressText =
            options.gateway ?? environment["KINDRED_GATEWAY"] ?? session?.gateway ?? GatewayTarget.defaultAddress
        guard let (host, port) = GatewayTarget.parseAddress(addressText) else {
            throw .usage("KINDRED_GATEWAY must be host:port, not \"\(addressText)\"")
        }
        var target = GatewayTarget(host: host, port: port)
        if options.tls || options.caFile != nil {
            target.tls = true
            target.caFile = options.caFile.map { $0.hasPrefix("/") ? $0 : workingDirectory + "/" + $0 }
        } else if let session, session.gateway == target.address {
            target.tls = session.tls
            target.caFile = session.caFile
        }
        let community =
            options.community ?? environment["KINDRED_COMMUNITY"] ?? session?.community ?? Self.defaultCommunity
        guard Self.isCommunitySlug(community) else {
            throw .usage("KINDRED_COMMUNITY must be 2..32 characters of a-z, 0-9 and -, not \"\(community)\"")
        }
        let milliseconds = Int64((options.timeout * 1000).rounded())
        return Settings(target: target, community: community, timeout: .milliseconds(milliseconds))
    }

    /// The directory of `session.json`: --config-dir, KINDRED_CONFIG_DIR, $XDG_CONFIG_HOME/kindred, ~/.config/kindred.
    public static func configDirectory(_ options: GlobalOptions, environment: [String: String]) throws(CLIError)
        -> String
    {
        if let directory = options.configDir ?? environment["KINDRED_CONFIG_DIR"], !directory.isEmpty {
            return directory
        }
        // The XDG base directory spec ignores relative values.
        if let xdg = environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") { return xdg + "/kindred" }
        guard let home = environment["HOME"], !home.isEmpty else {
            throw .usage("cannot find the config directory: set KINDRED_CONFIG_DIR or HOME")
        }
        return home + "/.config/kindred"
    }

    /// Community ids are slugs: 2..32 characters of [a-z0-9-] (kindred/common/v1/common.proto).
    static func isCommunitySlug(_ text: String) -> Bool {
        (2...32).contains(text.utf8.count)
            && text.utf8.allSatisfy {
                ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z"))
                    || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || $0 == UInt8(ascii: "-")
            }
    }
}
