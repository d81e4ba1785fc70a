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
///
/// Who gets a stream is `ChatStreamShares`: at most `perUser` per account, and one per account once the gateway
/// is nearly full. An account over its share is answered RESOURCE_EXHAUSTED (reason RATE_LIMITED, retry after
/// 10 s); a full gateway UNAVAILABLE. Refusals count in `gateway_chat_streams_refused_total{reason}`.
final class ChatStreamConnections: Sendable {
    /// chat-server's SETTINGS_MAX_CONCURRENT_STREAMS (KindredHTTP2's default).
    static let streamsPerConnection = 100
    /// What a client refused for its account's share is told to wait.
    static let retryAfter: Duration = .seconds(10)

    private struct State {
        var slots: ChatStreamSlots
        var shares: ChatStreamShares
    }

    private let clients: [GRPCClient]
    private let state: Mutex<State>
    private let metrics: GatewayMetrics?

    init(
        connections: Int,
        perConnection: Int = ChatStreamConnections.streamsPerConnection,
        perUser: Int,
        configuration: GRPCClientConfiguration,
        metrics: GatewayMetrics? = nil,
        logger: Logger
    ) {
        var single = configuration
        single.connectionCount = 1
        self.clients = (0..<max(1, connections)).map { _ in GRPCClient(configuration: single, logger: logger) }
        let slots = ChatStreamSlots(connections: connections, perConnection: perConnection)
        self.state = Mutex(
            State(slots: slots, shares: ChatStreamShares(capacity: slots.open.count * perConnection, perUser: perUser)))
        self.metrics = metrics
    }

    /// Runs `body` with the client of a connection that has room for one more stream, if `user` may open one.
    func withClient<Value: Sendable>(
        user: String,
        _ body: (GRPCClient) async throws -> Value
    ) async throws -> Value {
        let admitted = self.state.withLock { state -> Result<Int, RPCError> in
            let decision = state.shares.admit(user)
            guard decision == .admit else { return .failure(self.refusal(decision)) }
            guard let index = state.slots.acquire() else {
                state.shares.release(user)
                return .failure(self.refusal(.full))
            }
            return .success(index)
        }
        let index = try admitted.get()
        defer {
            self.state.withLock {
                $0.slots.release(index)
                $0.shares.release(user)
            }
        }
        return try await body(self.clients[index])
    }

    private func refusal(_ decision: ChatStreamShares.Decision) -> RPCError {
        switch decision {
        case .admit:
            preconditionFailure("an admitted stream is not refused")
        case .overUserCap:
            self.metrics?.chatStreamRefused(reason: "user_cap")
            return GatewayErrors.make(
                .resourceExhausted, "Too many live chat streams for this account; close one first",
                reason: "RATE_LIMITED", retryAfter: Self.retryAfter)
        case .overFairShare:
            self.metrics?.chatStreamRefused(reason: "fair_share")
            return GatewayErrors.make(
                .resourceExhausted, "Live chat streams are scarce on this gateway: one per account for now",
                reason: "RATE_LIMITED", retryAfter: Self.retryAfter)
        case .full:
            self.metrics?.chatStreamRefused(reason: "full")
            return RPCError(.unavailable, "Too many live chat streams on this gateway; retry later")
        }
    }

    func close() async {
        for client in self.clients { await client.close() }
    }
}
