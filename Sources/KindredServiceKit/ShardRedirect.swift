import KindredGRPC
import KindredGRPCServices

/// Discovery's answer to a call for a viewer whose cell another shard owns: FAILED_PRECONDITION `WRONG_SHARD`,
/// with the owner's shard number in the `kindred-discovery-shard` trailer. `DiscoveryShardRouter` follows it and
/// remembers the owner; nothing else sees it.
public struct ShardRedirect: Error, RPCErrorConvertible, Sendable, Equatable {
    /// The trailer naming the owner.
    public static let metadataKey = "kindred-discovery-shard"
    public static let reason = "WRONG_SHARD"

    /// The shard that owns the viewer's cell.
    public let shard: Int

    public init(shard: Int) {
        self.shard = shard
    }

    public var rpcError: RPCError {
        var error = RPCError.detailed(.failedPrecondition, "Another discovery shard serves this viewer", reason: Self.reason)
        error.metadata.add(Self.metadataKey, String(self.shard))
        return error
    }

    /// The redirect an error carries, if it is one.
    public init?(_ error: any Error) {
        guard let error = error as? RPCError, error.code == .failedPrecondition,
            let text = error.metadata[Self.metadataKey], let shard = Int(text), shard >= 0
        else { return nil }
        self.init(shard: shard)
    }
}
