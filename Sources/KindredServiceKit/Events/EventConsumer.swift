import Foundation
import KindredGRPCServices

/// A service that receives a producer's events through its `DeliverEvents` RPC.
public struct EventConsumer: Sendable, Hashable, CustomStringConvertible {
    /// The consumer's service name: "profile", "discovery", "match", "chat" (tests use others).
    public var name: String
    public var host: String
    public var port: Int

    public init(name: String, host: String, port: Int) {
        self.name = name
        self.host = host
        self.port = port
    }

    /// The gRPC service that has the RPC: `kindred.<name>.v1.<Name>Service`.
    public var grpcService: String {
        "kindred.\(self.name).v1.\(self.name.prefix(1).uppercased())\(self.name.dropFirst())Service"
    }

    public var description: String { "\(self.name)=\(self.host):\(self.port)" }

    /// Parses `name=host:port` entries separated by commas (`profile=127.0.0.1:50052,chat=127.0.0.1:50055`);
    /// an empty text is an empty list. Throws a ``ConfigurationError`` naming `key` on anything else.
    public static func parseList(_ text: String, key: String) throws(ConfigurationError) -> [EventConsumer] {
        var consumers: [EventConsumer] = []
        for entry in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !entry.isEmpty {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let colon = parts[1].lastIndex(of: ":"),
                let port = Int(parts[1][parts[1].index(after: colon)...]), (1...65535).contains(port),
                !parts[1][..<colon].isEmpty,
                !parts[0].isEmpty, parts[0].allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_") })
            else {
                throw ConfigurationError(key: key, problem: "must be a comma-separated list of name=host:port")
            }
            guard !consumers.contains(where: { $0.name == parts[0] }) else {
                throw ConfigurationError(key: key, problem: "names the consumer \(parts[0]) twice")
            }
            consumers.append(EventConsumer(name: parts[0], host: String(parts[1][..<colon]), port: port))
        }
        return consumers
    }
}
