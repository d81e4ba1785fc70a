import KindredGRPC
import KindredGRPCServices
import KindredProtobuf
import NIOConcurrencyHelpers

/// Calls to discovery when it runs as geographic shards (`DiscoveryShards`), one address per shard in shard order:
/// a call about a viewer goes to the shard last known to own them (shard 0 for a viewer not seen yet); a shard
/// that does not own the viewer answers `ShardRedirect` naming the owner, which is remembered and called at once.
/// A member who moves to another shard's cell is redirected by their old shard on their next call. The viewer's
/// position never leaves discovery: the cell rule runs there, callers only learn a shard number.
public final class DiscoveryShardRouter: Sendable {
    /// One client per shard, in shard order (closed by the owner).
    public let clients: [GRPCClient]
    private let owners = NIOLockedValueBox<[String: Int]>([:])

    /// Viewers remembered at most (then forgotten all at once: the next call of each redirects again).
    static let remembered = 100_000
    /// Redirects followed per call (a member moving while two shards disagree for a moment).
    static let maxRedirects = 2

    public init(clients: [GRPCClient]) {
        precondition(!clients.isEmpty, "a discovery shard router needs at least one shard")
        self.clients = clients
    }

    /// The shard addresses of `<key>` (comma-separated host:port, one per shard in order); nil when unset.
    public static func addresses(_ reader: EnvironmentReader, _ key: String) throws -> [ServiceAddress]? {
        guard let text = reader.string(key) else { return nil }
        let addresses = text.split(separator: ",").map { HostPort(String($0).trimmingCharacters(in: .whitespaces)) }
        guard !addresses.isEmpty, addresses.count <= 4096, addresses.allSatisfy({ $0 != nil }) else {
            throw ConfigurationError(key: key, problem: "must be host:port,host:port,… (one per shard, in shard order)")
        }
        return addresses.compactMap { $0.map(ServiceAddress.init) }
    }

    /// The shard a viewer is called on first.
    public func shard(of viewer: String) -> Int {
        self.owners.withLockedValue { $0[viewer] } ?? 0
    }

    /// A unary call about `viewer`, on the shard that owns them.
    public func unary<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ request: Request,
        viewer: String,
        metadata: Metadata = [:],
        options: CallOptions = .init()
    ) async throws -> Response {
        var shard = self.shard(of: viewer)
        var redirects = 0
        while true {
            do {
                return try await self.clients[shard].unary(method, request, metadata: metadata, options: options)
            } catch {
                guard let redirect = ShardRedirect(error), redirect.shard < self.clients.count,
                    redirect.shard != shard, redirects < Self.maxRedirects
                else { throw error }
                redirects += 1
                shard = redirect.shard
                self.remember(viewer, shard)
            }
        }
    }

    private func remember(_ viewer: String, _ shard: Int) {
        self.owners.withLockedValue { owners in
            if owners.count >= Self.remembered { owners.removeAll(keepingCapacity: true) }
            owners[viewer] = shard
        }
    }
}
