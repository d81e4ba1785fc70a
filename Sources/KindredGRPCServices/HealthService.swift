import KindredGRPC
import KindredProto
import NIOConcurrencyHelpers

private typealias HealthV1 = Grpc.Health.V1
private typealias ServingStatus = Grpc.Health.V1.HealthCheckResponse.ServingStatus

/// `grpc.health.v1.Health`: Check and Watch, per service name ("" is the whole server).
///
/// Statuses are set by the server's owner: SERVING once started, NOT_SERVING when shutdown begins, so load
/// balancers and `healthcheck` subcommands stop sending traffic before connections drain.
public final class HealthService: GRPCService {
    private struct State {
        var statuses: [String: ServingStatus] = [:]
        var watchers: [Int: (service: String, continuation: AsyncStream<ServingStatus>.Continuation)] = [:]
        var nextWatcher = 0
    }

    private let state = NIOLockedValueBox(State())

    public init() {}

    /// Sets the status of `service` ("" for the server as a whole) and tells its watchers.
    public func setStatus(_ serving: Bool, service: String = "") {
        let status: ServingStatus = serving ? .serving : .notServing
        let watchers = self.state.withLockedValue { state in
            state.statuses[service] = status
            return state.watchers.values.filter { $0.service == service }.map(\.continuation)
        }
        for watcher in watchers { watcher.yield(status) }
    }

    /// Marks every known service (and the server) SERVING or NOT_SERVING.
    public func setAll(_ serving: Bool) {
        let services = self.state.withLockedValue { Array($0.statuses.keys) }
        for service in Set(services + [""]) { self.setStatus(serving, service: service) }
    }

    /// The current status of `service`; nil when unknown.
    public func status(of service: String) -> Bool? {
        self.state.withLockedValue { $0.statuses[service] }.map { $0 == .serving }
    }

    public func register(in router: inout GRPCRouter) {
        router.immediateUnary(HealthV1.Health.Method.check) { request, _ in
            guard let status = self.state.withLockedValue({ $0.statuses[request.service] }) else {
                throw RPCError(.notFound, "Unknown service \(request.service)")
            }
            var response = HealthV1.HealthCheckResponse()
            response.status = status
            return .now(response)
        }
        router.serverStreaming(HealthV1.Health.Method.watch) { request, writer, _ in
            let (stream, continuation) = AsyncStream.makeStream(of: ServingStatus.self, bufferingPolicy: .bufferingNewest(1))
            let id = self.state.withLockedValue { state in
                let id = state.nextWatcher
                state.nextWatcher += 1
                state.watchers[id] = (request.service, continuation)
                continuation.yield(state.statuses[request.service] ?? .serviceUnknown)
                return id
            }
            defer { _ = self.state.withLockedValue { $0.watchers.removeValue(forKey: id) } }
            var last: ServingStatus?
            for await status in stream where status != last {
                last = status
                var response = HealthV1.HealthCheckResponse()
                response.status = status
                try await writer.write(response)
            }
        }
    }
}
