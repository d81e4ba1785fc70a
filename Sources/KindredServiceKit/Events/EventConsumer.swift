import Foundation
import KindredGRPCServices

/// A service that receives a producer's events through its `DeliverEvents` RPC.
public struct EventConsumer: Sendable, Hashable, CustomStringConvertible {
    /// The consumer's service name: "profile", "discovery", "match", "chat" (tests use others).
    public var name: String
    /// Its replicas (one or more); the relay balances its calls over them.
    public var address: ServiceAddress
    public var host: String { self.address.first.host }
    public var port: Int { self.address.first.port }

    public init(name: String, host: String, port: Int) {
        self.init(name: name, address: ServiceAddress(host: host, port: port))
    }

    public init(name: String, address: ServiceAddress) {
        self.name = name
        self.address = address
    }

    /// The service the consumer is: its name without the `_<n>` of a copy fed under a name of its own (discovery's
    /// shards: `discovery_1` is a discovery).
    public var service: String {
        guard let underscore = self.name.lastIndex(of: "_"), self.name.index(after: underscore) < self.name.endIndex,
            self.name[self.name.index(after: underscore)...].allSatisfy(\.isNumber)
        else { return self.name }
        return String(self.name[..<underscore])
    }

    /// The gRPC service that has the RPC: `kindred.<service>.v1.<Service>Service`.
    public var grpcService: String {
        "kindred.\(self.service).v1.\(self.service.prefix(1).uppercased())\(self.service.dropFirst())Service"
    }

    public var description: String {
        "\(self.name)=\(self.address.replicas.map(\.description).joined(separator: "|"))"
    }

    /// Parses `name=host:port` entries separated by commas (`profile=127.0.0.1:50052,chat=127.0.0.1:50055`), a
    /// consumer with several replicas as `name=host:port|host:port`; an empty text is an empty list. Throws a
    /// ``ConfigurationError`` naming `key` on anything else.
    public static func parseList(_ text: String, key: String) throws(ConfigurationError) -> [EventConsumer] {
        var consumers: [EventConsumer] = []
        for entry in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !entry.isEmpty {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2,
                let address = ServiceAddress(replicas: parts[1].split(separator: "|", omittingEmptySubsequences: false).compactMap {
                    HostPort(String($0)).flatMap { $0.port > 0 ? $0 : nil }
                }),
                address.replicas.count == parts[1].split(separator: "|", omittingEmptySubsequences: false).count,
                Set(address.replicas).count == address.replicas.count,
                !parts[0].isEmpty, parts[0].allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_") })
            else {
                throw ConfigurationError(
                    key: key, problem: "must be a comma-separated list of name=host:port (replicas: name=host:port|host:port)")
            }
            guard !consumers.contains(where: { $0.name == parts[0] }) else {
                throw ConfigurationError(key: key, problem: "names the consumer \(parts[0]) twice")
            }
            consumers.append(EventConsumer(name: parts[0], address: address))
        }
        return consumers
    }
}
