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

/// How an ``OutboxRelay`` delivers one producer's outbox.
///
/// A server reads the consumer list from `KINDRED_<SERVER>_EVENT_CONSUMERS` (``EventConsumer/parseList(_:key:)``;
/// default empty: events stay pending until a consumer is configured); the other fields have defaults meant
/// for production and are shortened by tests.
public struct OutboxRelayConfiguration: Sendable {
    /// The producing service (the outbox's `Outbox.producer`).
    public var producer: String
    /// Where events go. Each consumer has its own cursor per partition: a slow or absent consumer delays only
    /// itself.
    public var consumers: [EventConsumer]
    /// How often the relay looks for due work without a notification (retries after backoff, missed
    /// NOTIFYs). Default 1 s.
    public var pollInterval: Duration = .seconds(1)
    /// How long a claimed partition stays reserved for this relay. A relay that dies holding one delays that
    /// partition by at most this. Must exceed ``callTimeout``. Default 30 s.
    public var lease: Duration = .seconds(30)
    /// Deadline of one DeliverEvents call. Default 10 s.
    public var callTimeout: Duration = .seconds(10)
    /// Backoff of a partition whose delivery failed. Default 200 ms doubling to 60 s, with jitter.
    public var backoff = RetryBackoff()
    /// Events per DeliverEvents call, 1...100. Default 100 (the contract's maximum).
    public var maxBatch = DeliveryPlan.maxBatch
    /// Partitions claimed at once. Default 100.
    public var partitionsPerClaim = 100
    /// Delivery loops per consumer, 1...16. Default 4. Each loop claims its own partitions (the claim skips
    /// partitions another loop or replica holds), so order per partition is kept while one loop's round trips
    /// (claim, read, call, record) overlap another's: calls waiting for a consumer's acknowledgement (a match
    /// waiting for chat) see a delivery latency of about one round, not the length of one loop's queue.
    public var loopsPerConsumer = 4
    /// How often the pending and oldest-age gauges are recomputed. Default 5 s.
    public var metricsInterval: Duration = .seconds(5)
    /// Delivered events older than this are deleted from the outbox. Default 7 days.
    public var retention: Duration = .seconds(7 * 86_400)

    public init(producer: String, consumers: [EventConsumer]) {
        self.producer = producer
        self.consumers = consumers
    }
}
