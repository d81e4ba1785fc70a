import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit

extension ChatService {
    /// `ListThreads`: the caller's open, visible threads by last activity.
    func listThreads(_ request: Chat.ListThreadsRequest, _ context: ServerContext) async throws
        -> Chat.ListThreadsResponse
    {
        let user = try await self.access.requireUser(context).id
        // Each thread carries a profile card and a last message: at most `CardPage.maxCards` a page
        // (services/README.md, "Text and page limits").
        let size = min(try ChatValidation.pageSize(request.pageSize, default: 20), CardPage.maxCards)
        let scope = "threads|\(user)"
        let offset = try PageToken.offset(of: request.pageToken, key: self.pageTokenKey, scope: scope)
        var threads = try await self.threads.summaries(
            for: user, ids: nil, limit: size + 1, offset: offset, in: self.database)
        var response = Chat.ListThreadsResponse()
        if threads.count > size {
            threads.removeLast()
            response.nextPageToken = PageToken.encode(offset: offset + size, key: self.pageTokenKey, scope: scope)
        }
        response.threads = threads
        return response
    }

    /// `GetThreadSummaries`: last message and unread count of up to 100 of the viewer's threads (the gateway's
    /// ListMatches cards). Foreign and unknown ids are omitted.
    func getThreadSummaries(_ request: Chat.GetThreadSummariesRequest, _ context: ServerContext) async throws
        -> Chat.GetThreadSummariesResponse
    {
        let viewer = try await self.access.requireViewer(request.viewerUserId, context).id
        guard (1...100).contains(request.threadIds.count) else {
            throw ChatError.invalid("thread_ids", "OUT_OF_RANGE", "1..100 ids")
        }
        let ids = try request.threadIds.map { try ChatValidation.id($0, field: "thread_ids") }
        guard Set(ids).count == ids.count else { throw ChatError.invalid("thread_ids", "DUPLICATE", "distinct ids") }
        let found = try await self.threads.summaries(for: viewer, ids: ids, limit: 100, offset: 0, in: self.database)
        let byID = Dictionary(found.map { ($0.threadId, $0) }, uniquingKeysWith: { a, _ in a })
        var response = Chat.GetThreadSummariesResponse()
        response.threads = ids.compactMap { byID[$0] }
        return response
    }

    /// `GetUnreadCount`: totals across the viewer's open, visible threads.
    func getUnreadCount(_ request: Chat.GetUnreadCountRequest, _ context: ServerContext) async throws
        -> Chat.GetUnreadCountResponse
    {
        let viewer = try await self.access.requireViewer(request.viewerUserId, context).id
        let totals = try await self.threads.unreadTotals(for: viewer, in: self.database)
        var response = Chat.GetUnreadCountResponse()
        response.unreadMessages = totals.messages
        response.unreadThreads = totals.threads
        return response
    }

    /// `OpenThread`: services (outside the event path) and admins. Idempotent per match id.
    func openThread(_ request: Chat.OpenThreadRequest, _ context: ServerContext) async throws
        -> Chat.OpenThreadResponse
    {
        try await self.access.requireAdminOrService(context)
        let matchID = try ChatValidation.id(request.matchId, field: "match_id")
        guard request.userIds.count == 2 else { throw ChatError.invalid("user_ids", "OUT_OF_RANGE", "two users") }
        let users = try request.userIds.map { try ChatValidation.id($0, field: "user_ids") }
        guard users[0] != users[1] else { throw ChatError.invalid("user_ids", "DUPLICATE", "two distinct users") }
        guard !request.communityId.isEmpty, request.communityId.utf8.count <= 32 else {
            throw ChatError.invalid("community_id", "INVALID_COMMUNITY", "a community id")
        }
        let initiator = request.initiatorUserId.isEmpty ? users[0] : try ChatValidation.id(request.initiatorUserId, field: "initiator_user_id")
        guard users.contains(initiator) else {
            throw ChatError.invalid("initiator_user_id", "NOT_A_PARTICIPANT", "one of user_ids")
        }
        let created = try await self.database.withTransaction { transaction in
            try await self.openThread(
                matchID: matchID, users: users, communityID: request.communityId, initiator: initiator,
                mode: request.mode, createdUnixMs: Self.nowMs(), in: transaction)
        }
        guard created != nil else {
            // The id is taken by a thread of other participants: nothing to show the caller.
            throw ChatError(.notFound, "This match id belongs to another thread")
        }
        var response = Chat.OpenThreadResponse()
        response.created = created ?? false
        if let thread = try await self.threads.summaries(
            for: initiator, ids: [matchID], limit: 1, offset: 0, in: self.database
        ).first {
            response.thread = thread
        }
        return response
    }

    /// `CloseThread`: services and admins. Idempotent; NOT_FOUND for an unknown thread.
    func closeThread(_ request: Chat.CloseThreadRequest, _ context: ServerContext) async throws
        -> Chat.CloseThreadResponse
    {
        try await self.access.requireAdminOrService(context)
        let threadID = try ChatValidation.id(request.threadId, field: "thread_id")
        let endedBy = request.endedByUserId.isEmpty ? nil : try ChatValidation.id(request.endedByUserId, field: "ended_by_user_id")
        let closed = try await self.database.withTransaction { transaction in
            try await self.closeThread(threadID, reason: request.reason, endedBy: endedBy, in: transaction)
        }
        guard let closed else { throw ChatError.threadNotFound }
        var response = Chat.CloseThreadResponse()
        response.closed = closed
        return response
    }

    // MARK: Effects shared by the RPCs and the events

    /// Opens the thread of a match and tells both users (MatchCreatedNotice). True when created, false when it
    /// existed with the same participants, nil when the id belongs to another pair.
    func openThread(
        matchID: String, users: [String], communityID: String, initiator: String, mode: Kindred.Common.V1.CommunityMode,
        createdUnixMs: Int64, in transaction: PostgresTransaction
    ) async throws -> Bool? {
        let sorted = users.sorted()
        try await self.users.ensure(sorted, in: transaction)
        try await self.users.lock(sorted, in: transaction)
        let created = try await self.threads.open(
            threadID: matchID, users: (sorted[0], sorted[1]), communityID: communityID, initiator: initiator,
            mode: Int32(truncatingIfNeeded: mode.rawValue), createdUnixMs: createdUnixMs, in: transaction)
        guard created else {
            let existing = try await self.threads.find(matchID, lock: false, in: transaction)
            return existing.map { $0.userA == sorted[0] && $0.userB == sorted[1] ? false : nil } ?? nil
        }
        for user in sorted {
            var notice = Chat.MatchCreatedNotice()
            notice.matchId = matchID
            notice.otherUserId = user == sorted[0] ? sorted[1] : sorted[0]
            notice.initiatorUserId = initiator
            notice.mode = mode
            try await self.log.append(
                Self.event(.matchCreated(notice), at: createdUnixMs), to: user, threadID: matchID, in: transaction)
        }
        return true
    }

    /// Closes a thread and tells both users why, each from their own side: the one who ended it learns
    /// "unmatched by you" or "blocked by you", the other only that it ended. True when closed now, false when
    /// it was closed already, nil when unknown.
    func closeThread(
        _ threadID: String, reason: Kindred.Common.V1.MatchEndReason, endedBy: String?,
        in transaction: PostgresTransaction
    ) async throws -> Bool? {
        guard let peek = try await self.threads.find(threadID, lock: false, in: transaction) else { return nil }
        try await self.users.lock([peek.userA, peek.userB], in: transaction)
        guard
            try await self.threads.close(
                threadID, reason: Int32(truncatingIfNeeded: reason.rawValue), by: endedBy, in: transaction)
        else { return false }
        for user in [peek.userA, peek.userB] {
            var notice = Chat.ThreadClosedNotice()
            notice.threadId = threadID
            notice.reason =
                user != endedBy ? .ended : (reason == .blocked ? .blockedByYou : .unmatchedByYou)
            try await self.log.append(Self.event(.threadClosed(notice)), to: user, threadID: threadID, in: transaction)
        }
        return true
    }
}
