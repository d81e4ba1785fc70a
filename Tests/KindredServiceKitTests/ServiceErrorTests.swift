import KindredGRPC
import KindredGRPCServices
import KindredProto
import KindredServiceKit
import Testing

@Suite("ServiceError: one error type for every service, codes added by each")
struct ServiceErrorTests {
    @Test(
        "a code is a status and the detail's reason",
        arguments: [
            (ServiceError.Code.invalidArgument, StatusCode.invalidArgument, "INVALID_ARGUMENT"),
            (.unauthenticated, .unauthenticated, "UNAUTHENTICATED"),
            (.permissionDenied, .permissionDenied, "PERMISSION_DENIED"),
            (.notFound, .notFound, "NOT_FOUND"),
            (.failedPrecondition, .failedPrecondition, "FAILED_PRECONDITION"),
            (.rateLimited, .resourceExhausted, "RATE_LIMITED"),
            (.unavailable, .unavailable, "UNAVAILABLE"),
            (.init(.failedPrecondition, reason: "ALREADY_SWIPED"), .failedPrecondition, "ALREADY_SWIPED"),
        ] as [(ServiceError.Code, StatusCode, String)]
    )
    func codes(code: ServiceError.Code, status: StatusCode, reason: String) {
        let mapped = ServiceError(code, "Fixed text").rpcError
        #expect(mapped.code == status)
        #expect(mapped.message == "Fixed text")
        #expect(mapped.errorDetail?.reason == reason)
        #expect(mapped.errorDetail?.retryAfterMs == 0)
    }

    @Test func aCodeMadeOnTheSpotEqualsTheSameCodeNamed() {
        #expect(ServiceError(.failedPrecondition, "FAILED_PRECONDITION", "x") == ServiceError(.failedPrecondition, "x"))
        #expect(ServiceError.Code(.notFound, reason: "PROFILE_NOT_FOUND") != .notFound)
    }

    @Test func violationsAndTheRetryHintReachTheDetail() {
        let invalid = ServiceError(
            violations: [ServiceError.violation("profile.bio", "TOO_LONG", "at most 500 characters")],
            code: .init(.invalidArgument, reason: "TOO_LONG"))
        let detail = invalid.rpcError.errorDetail
        #expect(invalid.rpcError.code == .invalidArgument)
        #expect(detail?.reason == "TOO_LONG")
        #expect(
            detail?.fieldViolations.map { [$0.field, $0.reason, $0.hint] }
                == [["profile.bio", "TOO_LONG", "at most 500 characters"]])
        let limited = ServiceError(.rateLimited, "Too many requests", retryAfter: .milliseconds(1500))
        #expect(limited.rpcError.errorDetail?.retryAfterMs == 1500)
    }

    @Test func theDescriptionNamesTheReasonAndTheFixedTextOnly() {
        var error = ServiceError(violations: [ServiceError.violation("email", "MALFORMED", "an address")])
        error.message = "The request is invalid"
        #expect(error.description == "ServiceError(INVALID_ARGUMENT: The request is invalid)")
    }
}
