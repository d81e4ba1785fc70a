import KindredGRPC
import KindredGRPCServices
import KindredPostgres
import KindredProto
import KindredServiceKit
import Testing

@Suite("Errors mapped once: database failures and ErrorDetail")
struct ErrorMappingTests {
    @Test(
        "PostgresError → status and reason",
        arguments: [
            (PostgresError.Code.poolTimeout, StatusCode.unavailable, "UNAVAILABLE"),
            (.connectionFailed, .unavailable, "UNAVAILABLE"),
            (.connectionLost, .unavailable, "UNAVAILABLE"),
            (.statementTimeout, .unavailable, "UNAVAILABLE"),
            (.lockTimeout, .unavailable, "UNAVAILABLE"),
            (.serializationFailure, .unavailable, "UNAVAILABLE"),
            (.deadlock, .unavailable, "UNAVAILABLE"),
            (.poolShutdown, .unavailable, "UNAVAILABLE"),
            (.uniqueViolation, .alreadyExists, "ALREADY_EXISTS"),
            (.queryFailed, .internalError, "INTERNAL"),
            (.decodingFailed, .internalError, "INTERNAL"),
            (.foreignKeyViolation, .internalError, "INTERNAL"),
            (.checkViolation, .internalError, "INTERNAL"),
            (.invalidParameter, .internalError, "INTERNAL"),
            (.migrationFailed, .internalError, "INTERNAL"),
        ] as [(PostgresError.Code, StatusCode, String)]
    )
    func postgresErrors(code: PostgresError.Code, status: StatusCode, reason: String) throws {
        let error = PostgresError(
            code: code, reason: "test", sqlState: "23505", constraint: "accounts_email_key", table: "accounts",
            serverMessage: "duplicate key value violates unique constraint", serverDetail: "Key (email)=(a@b.c) already exists"
        )
        let mapped = error.rpcError
        #expect(mapped.code == status)
        #expect(mapped.errorDetail?.reason == reason)
        // Nothing of the database reaches the caller: no table, constraint, server text or value.
        for secret in ["accounts", "email", "a@b.c", "duplicate", "23505"] {
            #expect(!mapped.message.contains(secret))
        }
    }

    @Test("cancellation stays CANCELLED")
    func cancelled() {
        #expect(PostgresError(code: .cancelled, reason: "test").rpcError.code == .cancelled)
    }

    @Test(
        "retry-after rounds up to whole milliseconds, at least 1",
        arguments: [
            (Duration.nanoseconds(1), Int64(1)), (.milliseconds(1), 1), (.microseconds(1500), 2), (.seconds(2), 2000),
            (.zero, 1),
        ] as [(Duration, Int64)]
    )
    func retryAfter(duration: Duration, milliseconds: Int64) {
        let error = RPCError.detailed(.resourceExhausted, "Too many requests", reason: "RATE_LIMITED", retryAfter: duration)
        #expect(error.errorDetail?.retryAfterMs == milliseconds)
    }

    @Test("field violations and the request id travel in kindred-error-bin")
    func detail() throws {
        let error = GRPCRequestID.$current.withValue("req-7") {
            RPCError.detailed(
                .invalidArgument, "The request is invalid", reason: "INVALID_ARGUMENT",
                violations: [.init(field: "username", reason: "TOO_LONG", hint: "1..64 characters")]
            )
        }
        let detail = try #require(error.errorDetail)
        #expect(detail.reason == "INVALID_ARGUMENT")
        #expect(detail.requestId == "req-7")
        #expect(detail.fieldViolations.map(\.field) == ["username"])
        #expect(detail.fieldViolations.first?.hint == "1..64 characters")
    }
}
