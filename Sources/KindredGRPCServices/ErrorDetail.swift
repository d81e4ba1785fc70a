import KindredGRPC
import KindredProto

/// Kindred's machine-readable error details (proto/kindred/common/v1/common.proto): a
/// `kindred.common.v1.ErrorDetail` serialized into the `kindred-error-bin` trailer. Servers attach it with
/// `metadata`, clients read it with `RPCError.errorDetail`.
extension Kindred.Common.V1.ErrorDetail {
    public static let metadataKey = "kindred-error-bin"

    /// The detail as trailer metadata (empty if it cannot be serialized, which a valid detail always can).
    public var metadata: Metadata {
        var metadata = Metadata()
        if let bytes = try? self.serializedBytes() { metadata.add(Self.metadataKey, binary: bytes) }
        return metadata
    }
}

extension RPCError {
    /// The `kindred.common.v1.ErrorDetail` from the `kindred-error-bin` trailer, when present and valid.
    public var errorDetail: Kindred.Common.V1.ErrorDetail? {
        guard let bytes = self.metadata.binary(Kindred.Common.V1.ErrorDetail.metadataKey) else { return nil }
        return try? Kindred.Common.V1.ErrorDetail(serializedBytes: bytes)
    }
}
