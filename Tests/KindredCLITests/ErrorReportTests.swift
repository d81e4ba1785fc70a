import KindredGRPC
import KindredProto
import Testing

@testable import KindredCLI

@Suite struct ErrorReportTests {
    let timeout = Duration.seconds(10)

    @Test func reasonFromTheTrailer() throws {
        let error = try serverError(.unauthenticated, "The login or password is wrong", reason: "INVALID_CREDENTIALS")
        #expect(error.errorDetail?.reason == "INVALID_CREDENTIALS")
        let report = ErrorReport(error, target: testTarget, timeout: self.timeout)
        #expect(report.lines == ["error: The login or password is wrong [INVALID_CREDENTIALS]"])
        #expect(report.exitStatus == .serverError)
    }

    @Test func fieldViolationsAreListed() throws {
        let error = try serverError(
            .invalidArgument,
            "The request is invalid",
            reason: "INVALID_ARGUMENT",
            violations: [("password", "TOO_SHORT", "at least 8 characters"), ("username", "INVALID_FORMAT", "")]
        )
        let report = ErrorReport(error, target: testTarget, timeout: self.timeout)
        #expect(
            report.lines == [
                "error: The request is invalid [INVALID_ARGUMENT]",
                "  password: TOO_SHORT (at least 8 characters)",
                "  username: INVALID_FORMAT",
            ]
        )
    }

    @Test func retryAfterForRateLimits() throws {
        let error = try serverError(
            .resourceExhausted,
            "Too many requests; try again later",
            reason: "RATE_LIMITED",
            retryAfterMs: 42_500
        )
        let report = ErrorReport(error, target: testTarget, timeout: self.timeout)
        #expect(report.lines == ["error: Too many requests; try again later [RATE_LIMITED]", "  retry after 43 s"])
        #expect(report.exitStatus == .serverError)
    }

    @Test func hintForKnownReasons() throws {
        let error = try serverError(
            .failedPrecondition,
            "Confirm your email address first",
            reason: "EMAIL_NOT_VERIFIED"
        )
        let report = ErrorReport(error, target: testTarget, timeout: self.timeout)
        #expect(report.lines.count == 2)
        #expect(report.lines[1].contains("kindred verify"))
    }

    @Test func undecodableDetailIsIgnored() {
        var metadata = Metadata()
        metadata.add("kindred-error-bin", binary: [0xFF, 0xFF, 0xFF])
        let error = RPCError(.internalError, "", metadata: metadata)
        #expect(error.errorDetail == nil)
        let report = ErrorReport(error, target: testTarget, timeout: self.timeout)
        #expect(report.lines == ["error: the gateway failed to process the call"])
    }

    @Test func unreachableGatewayIsExitStatus3AndNamesTheAddress() {
        // What the client's connection pool raises on connection refused.
        let error = RPCError(.unavailable, "Failed to connect to 10.0.0.7:443")
        let report = ErrorReport(
            error,
            target: GatewayTarget(host: "10.0.0.7", port: 443, tls: true),
            timeout: self.timeout
        )
        #expect(report.exitStatus == .unavailable)
        #expect(report.lines == ["error: cannot reach the gateway at 10.0.0.7:443 (is it running? --gateway, --tls)"])
    }

    @Test func unavailableFromTheGatewayIsAlsoExitStatus3() throws {
        let error = try serverError(.unavailable, "The service is busy; try again", reason: "UNAVAILABLE")
        let report = ErrorReport(error, target: testTarget, timeout: self.timeout)
        #expect(report.exitStatus == .unavailable)
        #expect(
            report.lines == [
                "error: the gateway at 127.0.0.1:50050 is unavailable: The service is busy; try again [UNAVAILABLE]"
            ]
        )
    }

    @Test func deadlineNamesTheTimeout() {
        let report = ErrorReport(
            RPCError(.deadlineExceeded, "Deadline exceeded"),
            target: testTarget,
            timeout: .milliseconds(2500)
        )
        #expect(report.lines == ["error: no answer from 127.0.0.1:50050 within 2.5 s (raise --timeout?)"])
        #expect(report.exitStatus == .serverError)
    }

    @Test func localErrorsAreExitStatus2() {
        let report = ErrorReport(CLIError.notSignedIn, target: testTarget, timeout: self.timeout)
        #expect(report.lines == ["error: not signed in: run `kindred signin`"])
        #expect(report.exitStatus == .localError)
    }

    @Test(arguments: (0...16).compactMap(StatusCode.init(rawValue:)))
    func everyStatusHasAText(code: StatusCode) {
        #expect(!ErrorReport.statusText(code).isEmpty)
        let report = ErrorReport(RPCError(code, ""), target: testTarget, timeout: self.timeout)
        #expect(report.lines[0].hasPrefix("error: "))
        #expect(report.exitStatus == (code == .unavailable ? .unavailable : .serverError))
    }

    @Test(arguments: [
        (Int64(500), "0.5 s"), (1000, "1 s"), (1500, "1.5 s"), (42_001, "43 s"), (60_000, "1 min"),
        (125_000, "2 min 5 s"),
    ])
    func durations(milliseconds: Int64, text: String) {
        #expect(ErrorReport.seconds(milliseconds: milliseconds) == text)
    }
}
