import KindredGRPC
import KindredGRPCServices
import KindredPostgres

/// Database failures map to gRPC statuses in this one place, for every service: a handler lets a
/// `PostgresError` propagate and the runtime turns it into the status below (and logs its description, which
/// names the code, SQLSTATE and schema objects but never SQL text or values).
///
/// | PostgresError | status | reason |
/// |---|---|---|
/// | pool timeout, connection failed/lost, statement or lock timeout, serialization failure, deadlock, pool shut down | UNAVAILABLE "The service is busy; try again" | `UNAVAILABLE` |
/// | unique violation (one the store did not turn into a domain error) | ALREADY_EXISTS "The object already exists" | `ALREADY_EXISTS` |
/// | cancelled (the caller went away) | CANCELLED | — |
/// | anything else | INTERNAL "The server failed to process the call" | `INTERNAL` |
///
/// Serialization failures and deadlocks reach here only after `withTransaction`'s retries gave up, so "busy,
/// try again" is the truth for them too.
extension PostgresError: RPCErrorConvertible {
    public var rpcError: RPCError {
        switch self.code {
        case .poolTimeout, .connectionFailed, .connectionLost, .statementTimeout, .lockTimeout, .serializationFailure,
            .deadlock, .poolShutdown:
            RPCError.detailed(.unavailable, "The service is busy; try again", reason: "UNAVAILABLE")
        case .uniqueViolation:
            RPCError.detailed(.alreadyExists, "The object already exists", reason: "ALREADY_EXISTS")
        case .cancelled:
            RPCError(.cancelled, "The call was cancelled")
        default:
            RPCError.detailed(.internalError, "The server failed to process the call", reason: "INTERNAL")
        }
    }
}
