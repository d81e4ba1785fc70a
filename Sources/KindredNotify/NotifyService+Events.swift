import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit

extension NotifyService {
    /// `DeliverEvents`: what notify learns from the other services, each effect committed with the event id.
    /// auth: deletion erases the member's devices and settings.
    func deliverEvents(_ request: Kindred.Common.V1.DeliverEventsRequest, _ context: ServerContext) async throws
        -> Kindred.Common.V1.DeliverEventsResponse
    {
        let producer = try await self.access.requireService(["auth"], context)
        var response = Kindred.Common.V1.DeliverEventsResponse()
        response.acknowledgedEventIds = try await self.inbox.process(request.events, from: producer) {
            event, transaction in
            try await self.apply(event, in: transaction)
        }
        return response
    }

    func apply(_ event: Kindred.Common.V1.Event, in transaction: PostgresTransaction) async throws {
        let subject = event.userId.lowercased()
        switch event.payload {
        case .accountDeleted?:
            guard UUIDv7.isValid(subject) else { return }
            try await self.erase(subject, in: transaction)
        default:
            break  // irrelevant here: acknowledged all the same
        }
    }

    /// Account deletion: the member's devices and settings go. Afterwards `GetUserFootprint` counts zero.
    func erase(_ user: String, in transaction: PostgresTransaction) async throws {
        try await self.devices.deleteAll(of: user, in: transaction)
        try await self.settings.delete(user, in: transaction)
    }

    /// `GetUserFootprint`: rows notify holds about a user, per kind (zeros included). Admins and services.
    func getUserFootprint(_ request: Notify.GetUserFootprintRequest, _ context: ServerContext) async throws
        -> Notify.GetUserFootprintResponse
    {
        try await self.access.requireAdminOrService(context)
        guard UUIDv7.isValid(request.userId) else {
            throw NotifyError.invalid("user_id", "MALFORMED", "a user id")
        }
        let user = request.userId.lowercased()
        let counts = [
            ("devices", try await self.devices.count(of: user, in: self.database)),
            ("settings", try await self.settings.count(of: user, in: self.database)),
        ]
        var response = Notify.GetUserFootprintResponse()
        response.counts = counts.map { kind, rows in
            var count = Kindred.Common.V1.DataCount()
            count.kind = kind
            count.rows = rows
            return count
        }
        return response
    }
}
