import Foundation
import KindredGRPC
import KindredOpenSSL

/// Where a service a server calls runs: one `host:port`, several separated by commas (its replicas,
/// `127.0.0.1:50051,127.0.0.1:50061`), or one DNS name that resolves to several addresses (a replica each). The
/// client balances its calls over the replicas (`GRPCClient`, `ReplicaBalancer`).
public struct ServiceAddress: Hashable, Sendable, CustomStringConvertible {
    /// At least one.
    public private(set) var replicas: [HostPort]

    public init(_ address: HostPort) {
        self.replicas = [address]
    }

    public init(host: String, port: Int) {
        self.init(HostPort(host: host, port: port))
    }

    /// Several replicas; nil for an empty list.
    public init?(replicas: [HostPort]) {
        guard !replicas.isEmpty else { return nil }
        self.replicas = replicas
    }

    /// Parses `host:port[,host:port...]` (spaces around commas allowed); nil when any entry is not host:port or
    /// an address is listed twice.
    public init?(_ text: String) {
        var replicas: [HostPort] = []
        for entry in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard let address = HostPort(String(entry).trimmingCharacters(in: .whitespaces)),
                !replicas.contains(address)
            else { return nil }
            replicas.append(address)
        }
        guard !replicas.isEmpty else { return nil }
        self.replicas = replicas
    }

    /// The first replica (the only one of a single address).
    public var first: HostPort { self.replicas[0] }

    public var description: String { self.replicas.map(\.description).joined(separator: ",") }
}

extension GRPCClientConfiguration {
    /// A client of `address`: its single `host:port`, or all its replicas.
    public init(address: ServiceAddress, tls: TLSContext? = nil) {
        self.init(replicas: address.replicas.map { GRPCEndpoint(host: $0.host, port: $0.port) }, tls: tls)
    }
}

extension EnvironmentReader {
    /// A service's address: `host:port`, or several separated by commas (see `ServiceAddress`).
    public func serviceAddress(_ key: String, default value: ServiceAddress) throws -> ServiceAddress {
        try self.value(key, default: value, problem: "must be host:port, or a comma-separated list of them") {
            ServiceAddress($0)
        }
    }

    /// Like `serviceAddress`, but `off` (or `none`, `disabled`) means the service is not deployed.
    public func optionalServiceAddress(_ key: String, default value: ServiceAddress?) throws -> ServiceAddress? {
        if let text = self.string(key), ["off", "none", "disabled"].contains(text.lowercased()) { return nil }
        return try self.value(key, default: value, problem: "must be host:port, a comma-separated list of them, or off") {
            ServiceAddress($0)
        }
    }
}
