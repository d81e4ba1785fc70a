import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit

extension MatchService {
    /// `ListMatches`: active matches and connections, newest first.
    func listMatches(_ request: MatchApi.ListMatchesRequest, _ context: ServerContext) async throws
        -> MatchApi.ListMatchesResponse
    {
        let user = try await self.access.requireUser(context)
        let size = try Self.cardPageSize(request.pageSize)
        let direction: Int32
        switch request.direction {
        case .unspecified: direction = 0
        case .mutual: direction = 1
        case .outgoing: direction = 2
        case .incoming: direction = 3
        case .unrecognized: throw MatchError.invalid("direction", "INVALID_VALUE", "a ConnectionDirection")
        }
        let scope = "matches|\(user.id)|\(direction)|\(size)"
        let offset = try PageToken.offset(of: request.pageToken, key: self.pageTokenKey, scope: scope)
        let rows = try await self.matches.list(
            viewer: user.id, direction: direction, limit: size + 1, offset: offset, on: self.database)
        var response = MatchApi.ListMatchesResponse()
        response.matches = rows.prefix(size).map { Self.matchMessage($0.record, viewer: user.id, other: $0.other) }
        response.nextPageToken = self.nextPageToken(
            offset: offset, count: rows.count, pageSize: size, more: rows.count > size, scope: scope)
        return response
    }

    /// `Unmatch`: ends the match for both (MatchEnded). Idempotent; NOT_FOUND unless the caller takes part.
    /// Returns once every consumer applied it (as Block does), so the pair reads as unmatched everywhere from the
    /// answer on: no card, thread, deck or search result of the other, exactly as after a block.
    func unmatch(_ request: MatchApi.UnmatchRequest, _ context: ServerContext) async throws -> MatchApi.UnmatchResponse {
        let user = try await self.access.requireUser(context)
        let matchID = request.matchId.lowercased()
        guard UUIDv7.isValid(matchID) else { throw MatchError.invalid("match_id", "INVALID_FORMAT", "a match id") }
        try await self.database.withTransaction { transaction in
            guard let row = try await self.matches.lock(matchID: matchID, viewer: user.id, in: transaction) else {
                throw MatchError(.notFound, "No such match")
            }
            guard row.endedUnixMs == nil else { return }  // ended before: nothing to do
            try await self.endMatch(row.record.id, users: [user.id, row.other], by: user.id, reason: .unmatched,
                                    community: user.community, in: transaction)
        }
        try await self.awaitConsumers(of: user.id)
        return MatchApi.UnmatchResponse()
    }

    /// Ends a match and announces it (MatchEnded, partition `users[0]`).
    func endMatch(
        _ matchID: String,
        users: [String],
        by: String?,
        reason: CommonApi.MatchEndReason,
        community: String,
        in transaction: PostgresTransaction
    ) async throws {
        let code: Int32 =
            switch reason {
            case .unmatched: 1
            case .blocked: 2
            case .accountDeleted: 3
            case .admin: 4
            default: 0
            }
        try await self.matches.end(matchID: matchID, by: by, reason: code, in: transaction)
        var event = CommonApi.Event()
        event.userId = users[0]
        event.communityId = community
        event.payload = .matchEnded(
            .with {
                $0.matchId = matchID
                $0.userIds = users.sorted()
                $0.endedByUserId = by ?? ""
                $0.reason = reason
            })
        try await self.outbox.append(event, in: transaction)
    }

    /// `ListLikesReceived`: pending likes on the caller, newest first.
    func listLikesReceived(_ request: MatchApi.ListLikesReceivedRequest, _ context: ServerContext) async throws
        -> MatchApi.ListLikesReceivedResponse
    {
        let user = try await self.access.requireUser(context)
        let size = try Self.cardPageSize(request.pageSize)
        let scope = "likes|\(user.id)|\(size)"
        let offset = try PageToken.offset(of: request.pageToken, key: self.pageTokenKey, scope: scope)
        let (likes, total) = try await self.matches.likesReceived(
            viewer: user.id, limit: size + 1, offset: offset, on: self.database)
        var response = MatchApi.ListLikesReceivedResponse()
        response.likes = likes.prefix(size).map { like in
            var message = MatchApi.LikeReceived()
            message.userId = like.0
            message.likedUnixMs = like.1
            return message
        }
        response.totalCount = Int32(total)
        response.nextPageToken = self.nextPageToken(
            offset: offset, count: likes.count, pageSize: size, more: likes.count > size, scope: scope)
        return response
    }
}
