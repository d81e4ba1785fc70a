import KindredGRPC
import KindredGRPCServices
import KindredPostgres
import KindredProto

extension EventInbox {
    /// The server's background task that runs ``purge()`` once at start and then every `interval` (default
    /// hourly) until the server stops. A failed purge is logged and tried again at the next turn.
    public func purgeTask(every interval: Duration = .seconds(3600)) -> BackgroundTask {
        BackgroundTask("inbox-purge") {
            while !Task.isCancelled {
                do {
                    try await self.purge()
                } catch {
                    self.logger.warning("inbox purge failed", metadata: ["error.type": "\(type(of: error))"])
                }
                try await Task.sleep(for: interval)
            }
        }
    }
}

extension EventInbox {
    /// A consumer's `DeliverEvents` around its `apply` — the function the JetStream bus also calls
    /// (``JetStreamEventConsumer``), so both buses apply events the same way: the caller must be one of `producers`
    /// (a service token), then `apply` takes the batch and returns the ids to acknowledge.
    public static func deliver(
        _ request: Kindred.Common.V1.DeliverEventsRequest,
        from producers: Set<String>,
        access: ServiceAccess,
        _ context: ServerContext,
        apply: JetStreamEventConsumer.Apply
    ) async throws -> Kindred.Common.V1.DeliverEventsResponse {
        let producer = try await access.requireService(producers, context)
        var response = Kindred.Common.V1.DeliverEventsResponse()
        response.acknowledgedEventIds = try await apply(request.events, producer)
        return response
    }
}
