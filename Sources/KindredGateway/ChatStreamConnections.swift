import KindredGRPC
import Logging
import Synchronization

/// Which of the gateway's connections to chat a new Subscribe stream goes on: the one with the fewest open
/// streams, never more than `perConnection` on one. A value type without I/O (tested in ChatStreamSlotsTests).
struct ChatStreamSlots: Sendable, Equatable {
    private(set) var open: [Int]
    let perConnection: Int

    init(connections: Int, perConnection: Int) {
        self.open = Array(repeating: 0, count: max(1, connections))
        self.perConnection = perConnection
    }

    /// Takes a place on the least-used connection; nil when every connection is full.
    mutating func acquire() -> Int? {
        guard let index = self.open.indices.min(by: { self.open[$0] < self.open[$1] }),
            self.open[index] < self.perConnection
        else { return nil }
        self.open[index] += 1
        return index
    }

    /// Gives back a place taken with `acquire`.
    mutating func release(_ index: Int) {
        self.open[index] -= 1
    }
}

/// The connections chat's Subscribe streams are proxied on, apart from the unary calls' client.
///
/// A Subscribe stream lives for minutes to hours and holds one HTTP/2 stream on its connection the whole time;
/// chat-server allows 100 concurrent streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS). On the unary
/// calls' client (two connections) about 200 live subscribers therefore took every stream to chat: the next
/// Subscribe and every SendMessage, History and ListThreads through the gateway then waited out their deadlines
/// (found by `kindred-load mixed`; Tests/Cluster/test_faults.py opens 210 streams). Here each
/// stream goes on the least-used of `KINDRED_GATEWAY_CHAT_STREAM_CONNECTIONS` single-connection clients (each
/// connects on first use), at most 100 per connection; past that, Subscribe answers UNAVAILABLE at once (the app
/// retries with backoff) instead of hanging.
///
/// Kept now that `GRPCClient` itself honours the server's stream limit (it opens more connections when its
/// connections are full, up to `maxConnectionCount`, then queues calls until their deadline): on the shared
/// client, live subscribers would still take the unary calls' connections up to that bound and then make
/// SendMessage and History queue behind streams that last hours; and a Subscribe has a long deadline, so past
/// the bound it would wait for minutes instead of being refused. Here subscribers have their own connections and
/// an explicit bound that answers at once.
final class ChatStreamConnections: Sendable {
    /// chat-server's SETTINGS_MAX_CONCURRENT_STREAMS (KindredHTTP2's default).
    static let streamsPerConnection = 100

    private let clients: [GRPCClient]
    private let slots: Mutex<ChatStreamSlots>

    init(connections: Int, configuration: GRPCClientConfiguration, logger: Logger) {
        var single = configuration
        single.connectionCount = 1
        self.clients = (0..<max(1, connections)).map { _ in GRPCClient(configuration: single, logger: logger) }
        self.slots = Mutex(ChatStreamSlots(connections: connections, perConnection: Self.streamsPerConnection))
    }

    /// Runs `body` with the client of a connection that has room for one more stream.
    func withClient<Result: Sendable>(_ body: (GRPCClient) async throws -> Result) async throws -> Result {
        guard let index = self.slots.withLock({ $0.acquire() }) else {
            throw RPCError(.unavailable, "Too many live chat streams on this gateway; retry later")
        }
        defer { self.slots.withLock { $0.release(index) } }
        return try await body(self.clients[index])
    }

    func close() async {
        for client in self.clients { await client.close() }
    }
}
