import KindredGRPC
import KindredProto
import NIOConcurrencyHelpers
import NIOCore
import Testing

/// Immediate unary handlers (`GRPCRouter.immediateUnary`): the synchronous part runs on the loop without a task;
/// `.later` runs as an ordinary handler, with the call's deadline, its request id and cancellation.
private struct ImmediateService: GRPCService {
    /// What the handler saw, per message: whether it ran inside a task, and the later part's deadline.
    let seen = NIOLockedValueBox([String: (inTask: Bool, laterDeadline: NIODeadline?)]())

    func register(in router: inout GRPCRouter) {
        let seen = self.seen
        router.immediateUnary(V1.InteropService.Method.echo) { request, context in
            let inTask = withUnsafeCurrentTask { $0 != nil }
            seen.withLockedValue { $0[request.message] = (inTask, nil) }
            if request.failWithCode != 0 {
                throw RPCError(StatusCode(rawValue: Int(request.failWithCode))!, request.failWithMessage)
            }
            var metadata = Metadata()
            metadata.add("x-request-id-seen", context.requestID)
            context.setTrailingMetadata(metadata)
            guard request.delayMs > 0 else {
                return .now(.with { $0.message = request.message })
            }
            return .later {
                seen.withLockedValue { $0[request.message]?.laterDeadline = GRPCDeadline.current }
                try await Task.sleep(for: .milliseconds(Int64(request.delayMs)))
                return .with { $0.message = request.message + " later" }
            }
        }
    }
}

@Suite(.serialized) struct ImmediateHandlerTests {
    @Test func answersNowWithoutATask() async throws {
        let service = ImmediateService()
        let harness = try await Harness.start(services: [service])
        let response = try await harness.client.unaryWithMetadata(
            V1.InteropService.Method.echo, echo("now"), metadata: ["x-request-id": "req-immediate-1"])
        #expect(response.message.message == "now")
        #expect(response.trailers["x-request-id-seen"] == "req-immediate-1")
        #expect(service.seen.withLockedValue { $0["now"]?.inTask } == false)
        await harness.stop()
    }

    @Test func laterRunsAsATaskWithTheDeadline() async throws {
        let service = ImmediateService()
        let harness = try await Harness.start(services: [service])
        let response = try await harness.client.unary(
            V1.InteropService.Method.echo, echo("wait", delayMs: 10), options: CallOptions(timeout: .seconds(20)))
        #expect(response.message == "wait later")
        let deadline = try #require(service.seen.withLockedValue { $0["wait"]?.laterDeadline })
        #expect(deadline > .now() + .seconds(10))
        await harness.stop()
    }

    @Test func aThrownErrorIsTheStatus() async throws {
        let harness = try await Harness.start(services: [ImmediateService()])
        var request = echo("bad")
        request.failWithCode = Int32(StatusCode.failedPrecondition.rawValue)
        request.failWithMessage = "not now"
        do {
            _ = try await harness.client.unary(V1.InteropService.Method.echo, request)
            Issue.record("the call succeeded")
        } catch let error as RPCError {
            #expect(error.code == .failedPrecondition)
            #expect(error.message == "not now")
        }
        await harness.stop()
    }

    @Test func theDeadlineEndsTheLaterPart() async throws {
        let harness = try await Harness.start(services: [ImmediateService()])
        let start = ContinuousClock.now
        await expectStatus(.deadlineExceeded) {
            _ = try await harness.client.unary(
                V1.InteropService.Method.echo, echo("slow", delayMs: 20_000), options: CallOptions(timeout: .milliseconds(200)))
        }
        #expect(ContinuousClock.now - start < .seconds(10))
        await harness.stop()
    }
}
