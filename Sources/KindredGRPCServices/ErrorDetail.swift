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

extension Kindred.Common.V1.FieldViolation {
    /// A violation of one request field: `field` is its path (`profile.bio`), `reason` a machine code
    /// (`TOO_LONG`), `hint` a short human text (never the rejected value).
    public init(field: String, reason: String, hint: String = "") {
        self.init()
        self.field = field
        self.reason = reason
        self.hint = hint
    }
}

extension RPCError {
    /// The one way Kindred servers build an error a client can act on: a status, a fixed message, and a
    /// `kindred-error-bin` trailer with the reason code, field violations, a retry hint (rounded up to whole
    /// milliseconds, at least 1) and the request id of the call being served.
    public static func detailed(
        _ code: StatusCode,
        _ message: String,
        reason: String,
        violations: [Kindred.Common.V1.FieldViolation] = [],
        retryAfter: Duration? = nil
    ) -> RPCError {
        var detail = Kindred.Common.V1.ErrorDetail()
        detail.reason = reason
        detail.fieldViolations = violations
        if let retryAfter {
            let (seconds, attoseconds) = retryAfter.components
            let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
            detail.retryAfterMs = max(1, milliseconds)
        }
        return RPCError(code, message, metadata: detail.metadataWithRequestID)
    }
}

extension Kindred.Common.V1.ErrorDetail {
    /// The detail as trailer metadata, with the request id of the call being served when it has none.
    public var metadataWithRequestID: Metadata {
        var detail = self
        if detail.requestId.isEmpty, let id = GRPCRequestID.current { detail.requestId = id }
        return detail.metadata
    }
}
