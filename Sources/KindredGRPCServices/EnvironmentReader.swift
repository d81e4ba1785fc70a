import Foundation

/// A configuration key with a bad value. The message names the key and what it must be; never the value
/// (it may be a secret).
public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    public let key: String
    public let problem: String
    public init(key: String, problem: String) {
        self.key = key
        self.problem = problem
    }
    public var description: String { "\(self.key) \(self.problem)" }
}

/// Reads server configuration from environment variables: unset or blank means "use the default"; a value
/// that does not parse is a `ConfigurationError` (the server refuses to start rather than guess).
public struct EnvironmentReader: Sendable {
    public let environment: [String: String]

    public init(_ environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.environment = environment
    }

    /// The trimmed value, or nil when unset or blank.
    public func string(_ key: String) -> String? {
        guard let value = self.environment[key]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else {
            return nil
        }
        return value
    }

    public func value<T>(_ key: String, default value: T, problem: String, _ parse: (String) -> T?) throws -> T {
        guard let text = self.string(key) else { return value }
        guard let parsed = parse(text) else { throw ConfigurationError(key: key, problem: problem) }
        return parsed
    }

    public func int(_ key: String, default value: Int, in range: ClosedRange<Int> = Int.min...Int.max) throws -> Int {
        try self.value(key, default: value, problem: "must be an integer in \(range.lowerBound)...\(range.upperBound)") {
            Int($0).flatMap { range.contains($0) ? $0 : nil }
        }
    }

    public func double(_ key: String, default value: Double, in range: ClosedRange<Double>) throws -> Double {
        try self.value(key, default: value, problem: "must be a number in \(range.lowerBound)...\(range.upperBound)") {
            Double($0).flatMap { range.contains($0) ? $0 : nil }
        }
    }

    public func bool(_ key: String, default value: Bool) throws -> Bool {
        try self.value(key, default: value, problem: "must be true or false") {
            switch $0.lowercased() {
            case "1", "true", "yes", "on": true
            case "0", "false", "no", "off": false
            default: nil
            }
        }
    }

    /// Milliseconds as a Duration.
    public func milliseconds(_ key: String, default value: Duration, in range: ClosedRange<Int> = 1...86_400_000) throws
        -> Duration
    {
        guard self.string(key) != nil else { return value }
        return .milliseconds(try self.int(key, default: 0, in: range))
    }

    /// Whole seconds, as the `Int64` counts the services store (token lifetimes, windows).
    public func seconds(_ key: String, default value: Int64, in range: ClosedRange<Int64>) throws -> Int64 {
        try self.value(key, default: value, problem: "must be a whole number of seconds in \(range.lowerBound)...\(range.upperBound)") {
            Int64($0).flatMap { range.contains($0) ? $0 : nil }
        }
    }

    /// One of a fixed set of words (compared in lower case).
    public func choice<T>(_ key: String, default value: T, _ choices: KeyValuePairs<String, T>) throws -> T {
        try self.value(key, default: value, problem: "must be " + choices.map(\.key).joined(separator: ", ")) { text in
            choices.first { $0.key == text.lowercased() }?.value
        }
    }

    /// A comma-separated list; blank items are dropped.
    public func list(_ key: String, default value: Set<String>) -> Set<String> {
        guard let text = self.string(key) else { return value }
        return Set(text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
    }

    /// A secret whose length must be within `length` (the value never appears in an error).
    ///
    /// Every secret may also come from a file: `<key>_FILE` names it (its content, without surrounding white
    /// space, is the value), as compose's generated secrets do, so a secret need not sit in an environment
    /// listing. Setting both is refused; a file that cannot be read stops the start naming `<key>_FILE`.
    public func secret(_ key: String, length: ClosedRange<Int>) throws -> String? {
        let problem = "must be \(length.lowerBound)..\(length.upperBound) characters"
        guard let path = self.string(key + "_FILE") else {
            // Not through `value(_:default:problem:_:)`: with an optional result its parser's nil reads as "unset"
            // (a `String??` holding nil), so a too-short secret would be taken as no secret at all.
            guard let text = self.string(key) else { return nil }
            guard length.contains(text.count) else { throw ConfigurationError(key: key, problem: problem) }
            return text
        }
        guard self.string(key) == nil else {
            throw ConfigurationError(key: key, problem: "and \(key)_FILE are both set: set one")
        }
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8)
        else { throw ConfigurationError(key: key + "_FILE", problem: "names a file that cannot be read") }
        let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard length.contains(value.count) else {
            throw ConfigurationError(key: key + "_FILE", problem: "names a file whose content " + problem)
        }
        return value
    }

    /// `host:port` (IPv6 hosts in brackets: `[::1]:50050`).
    public func address(_ key: String, default value: HostPort) throws -> HostPort {
        try self.value(key, default: value, problem: "must be host:port") { HostPort($0) }
    }

    /// Like `address`, but `off` (or `none`, `disabled`) turns the listener off.
    public func optionalAddress(_ key: String, default value: HostPort?) throws -> HostPort? {
        if let text = self.string(key), ["off", "none", "disabled"].contains(text.lowercased()) { return nil }
        return try self.value(key, default: value, problem: "must be host:port or off") { HostPort($0) }
    }
}

/// A listen or peer address.
public struct HostPort: Hashable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port`: a port in 0...65535, and a host that is a name or IPv4 address, or an IPv6 address
    /// in brackets (`[::1]:50050`). An IPv6 address without brackets is ambiguous and refused.
    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (0...65_535).contains(port)
        else { return nil }
        var host = Substring(text[..<colon])
        let bracketed = host.hasPrefix("[") && host.hasSuffix("]")
        if bracketed { host = host.dropFirst().dropLast() }
        guard !host.isEmpty else { return nil }
        guard host.allSatisfy(bracketed ? Self.isIPv6Character : Self.isHostNameCharacter),
            !bracketed || host.contains(":")
        else { return nil }
        self.host = String(host)
        self.port = port
    }

    private static func isIPv6Character(_ character: Character) -> Bool {
        character.isHexDigit || character == ":" || character == "." || character == "%"
            || (character.isASCII && character.isLetter)  // a zone id after %: fe80::1%eth0
    }

    private static func isHostNameCharacter(_ character: Character) -> Bool {
        guard character.isASCII else { return false }
        return character.isLetter || character.isNumber || character == "." || character == "-" || character == "_"
    }

    /// Where a local probe reaches a server listening on this address (`0.0.0.0` → loopback).
    public var dialable: HostPort {
        switch self.host {
        case "0.0.0.0": HostPort(host: "127.0.0.1", port: self.port)
        case "::": HostPort(host: "::1", port: self.port)
        default: self
        }
    }

    public var description: String { self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)" }
}
