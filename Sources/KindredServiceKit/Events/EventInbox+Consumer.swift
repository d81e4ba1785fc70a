import KindredGRPC
import KindredGRPCServices
import KindredPostgres
import KindredProto

extension EventInbox {
    /// A consumer's whole `DeliverEvents` handler: the caller must be one of `producers` (a service token), then
    /// the batch goes through ``process(_:from:handler:)`` and the processed ids are acknowledged.
    ///
    /// ```swift
    /// func deliverEvents(_ request: Kindred.Common.V1.DeliverEventsRequest, _ context: ServerContext) async throws
    ///     -> Kindred.Common.V1.DeliverEventsResponse
    /// {
    ///     try await self.inbox.deliver(request, from: ["auth", "match"], access: self.access, context) {
    ///         event, transaction in try await self.apply(event, in: transaction)
    ///     }
    /// }
    /// ```
    ///
    /// `event.producer` is the calling service for every event the handler sees.
    public func deliver(
        _ request: Kindred.Common.V1.DeliverEventsRequest,
        from producers: Set<String>,
        access: ServiceAccess,
        _ context: ServerContext,
        handler: Handler
    ) async throws -> Kindred.Common.V1.DeliverEventsResponse {
        let producer = try await access.requireService(producers, context)
        var response = Kindred.Common.V1.DeliverEventsResponse()
        response.acknowledgedEventIds = try await self.process(request.events, from: producer, handler: handler)
        return response
    }

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
