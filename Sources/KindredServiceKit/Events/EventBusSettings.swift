import KindredGRPCServices
import KindredNATS

/// Which bus carries events between services, read the same way by every server: `KINDRED_EVENTS_NATS_URL`
/// (comma-separated `nats://host:port`) makes it NATS JetStream; without it the producers' relays call their
/// consumers' `DeliverEvents` (the embedded default).
public struct EventBusSettings: Sendable, Equatable {
    /// The JetStream servers, empty for the PostgreSQL push relay.
    public var natsServers: [NATSServerAddress] = []

    public static let environmentKey = "KINDRED_EVENTS_NATS_URL"

    public init(natsServers: [NATSServerAddress] = []) {
        self.natsServers = natsServers
    }

    public init(environment: EnvironmentReader) throws {
        if let value = environment.string(Self.environmentKey) {
            guard let servers = NATSServerAddress.parseList(value) else {
                throw ConfigurationError(
                    key: Self.environmentKey, problem: "must be a comma-separated list of nats://host:port")
            }
            self.natsServers = servers
        }
    }

    public var usesNATS: Bool { !self.natsServers.isEmpty }
}
