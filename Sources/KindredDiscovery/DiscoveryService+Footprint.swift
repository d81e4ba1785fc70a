import KindredGRPC
import KindredProto
import KindredServiceKit

extension DiscoveryService {
    /// `GetUserFootprint` (admin or service): rows discovery holds about a user, per kind, zeros included.
    func getUserFootprint(_ request: CommonApi.GetUserFootprintRequest, _ context: ServerContext) async throws
        -> CommonApi.GetUserFootprintResponse
    {
        try await self.access.requireAdminOrService(context)
        let user = try Self.userKey(request.userId, field: "user_id")
        return .init(counts: try await self.store.footprint(user.uuidString, on: self.database))
    }
}
