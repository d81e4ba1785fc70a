/// One server of a NATS cluster: `nats://host:port`, `host:port` or `host` (port 4222).
public struct NATSServerAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int = 4222) {
        self.host = host
        self.port = port
    }

    public var description: String { "nats://\(self.host):\(self.port)" }

    /// Parses a comma-separated list (`nats://127.0.0.1:4222,nats://127.0.0.1:4223`); nil for an empty list or
    /// an entry that is not `[nats://]host[:port]`.
    public static func parseList(_ text: String) -> [NATSServerAddress]? {
        var servers: [NATSServerAddress] = []
        for entry in text.split(separator: ",") {
            var rest = Substring(entry.trimmingCharacters(in: " \t"))
            if rest.hasPrefix("nats://") { rest = rest.dropFirst("nats://".count) }
            guard !rest.isEmpty, !rest.contains("/"), !rest.contains("@") else { return nil }
            if let colon = rest.lastIndex(of: ":") {
                guard let port = Int(rest[rest.index(after: colon)...]), (1...65535).contains(port),
                    colon != rest.startIndex
                else { return nil }
                servers.append(NATSServerAddress(host: String(rest[..<colon]), port: port))
            } else {
                servers.append(NATSServerAddress(host: String(rest)))
            }
        }
        return servers.isEmpty ? nil : servers
    }
}

extension StringProtocol {
    fileprivate func trimmingCharacters(in characters: String) -> String {
        var text = Substring(self)
        while let first = text.first, characters.contains(first) { text.removeFirst() }
        while let last = text.last, characters.contains(last) { text.removeLast() }
        return String(text)
    }
}
