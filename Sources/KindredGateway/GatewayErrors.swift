import KindredGRPC
import KindredGRPCServices
import KindredProto
import Logging

/// Errors the gateway answers with: a gRPC status, a fixed message, and a `kindred-error-bin` trailer
/// (kindred.common.v1.ErrorDetail) carrying the reason code, retry hint and the request id.
enum GatewayErrors {
    static func make(_ code: StatusCode, _ message: String, reason: String, retryAfter: Duration? = nil) -> RPCError {
        var detail = Kindred.Common.V1.ErrorDetail()
        detail.reason = reason
        if let retryAfter {
            let (seconds, attoseconds) = retryAfter.components
            detail.retryAfterMs = max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        }
        return RPCError(code, message, metadata: self.trailer(detail))
    }

    static func rateLimited(retryAfter: Duration) -> RPCError {
        self.make(.resourceExhausted, "Too many requests; retry later", reason: "RATE_LIMITED", retryAfter: retryAfter)
    }

    static func unauthenticated(_ message: String = "A valid access token is required") -> RPCError {
        self.make(.unauthenticated, message, reason: "UNAUTHENTICATED")
    }

    static func notDeployed(_ what: String) -> RPCError {
        self.make(.unimplemented, "\(what) is not available in this deployment", reason: "NOT_DEPLOYED")
    }

    /// The detail with this call's request id, as trailer metadata.
    static func trailer(_ detail: Kindred.Common.V1.ErrorDetail) -> Metadata {
        var detail = detail
        if detail.requestId.isEmpty, let id = GRPCRequestID.current { detail.requestId = id }
        return detail.metadata
    }

    /// What a client sees of a downstream failure. Statuses that describe the request (bad argument, not
    /// found, not allowed, rate limited...) pass through with the service's message and ErrorDetail, which
    /// services keep safe for clients; everything that describes the service itself (connection lost,
    /// internal failure, version skew) becomes a fixed message, and the original goes to the log only.
    static func fromDownstream(_ error: any Error, service: String, logger: Logger) -> RPCError {
        guard let error = error as? RPCError else {
            if error is CancellationError { return RPCError(.cancelled, "The call was cancelled") }
            logger.warning("downstream call failed", metadata: ["service": "\(service)", "error": "\(error)"])
            return self.make(.unavailable, "The service is unavailable; retry with backoff", reason: "UNAVAILABLE")
        }
        switch error.code {
        case .invalidArgument, .notFound, .alreadyExists, .permissionDenied, .unauthenticated, .failedPrecondition,
            .resourceExhausted, .aborted, .outOfRange:
            var detail: Kindred.Common.V1.ErrorDetail
            if let decoded = error.errorDetail {
                detail = decoded
            } else {
                detail = Kindred.Common.V1.ErrorDetail()
                detail.reason = error.code.description
            }
            return RPCError(error.code, error.message, metadata: self.trailer(detail))
        case .cancelled:
            return RPCError(.cancelled, "The call was cancelled")
        case .deadlineExceeded:
            return self.make(.deadlineExceeded, "The call did not finish before its deadline", reason: "DEADLINE_EXCEEDED")
        case .unavailable:
            logger.info("downstream unavailable", metadata: ["service": "\(service)", "error": "\(error.message)"])
            return self.make(.unavailable, "The service is unavailable; retry with backoff", reason: "UNAVAILABLE")
        case .unimplemented:
            logger.warning("downstream method missing", metadata: ["service": "\(service)", "error": "\(error.message)"])
            return self.notDeployed("This call")
        default:  // UNKNOWN, INTERNAL, DATA_LOSS (and OK, which never arrives as an error)
            logger.warning("downstream failure", metadata: ["service": "\(service)", "grpc.code": "\(error.code)"])
            return self.make(.internalError, "The server failed to process the call", reason: "INTERNAL")
        }
    }
}
