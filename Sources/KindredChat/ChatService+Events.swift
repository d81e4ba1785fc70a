import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit

extension ChatService {
    /// `DeliverEvents`: what chat learns from the other services, each effect committed with the event id.
    /// match: MatchCreated opens the thread, MatchEnded and UserBlocked close it; auth: deactivation hides,
    /// reactivation restores, deletion erases; profile: CommunityUpdated sets the hourly message limit.
    func deliverEvents(_ request: Kindred.Common.V1.DeliverEventsRequest, _ context: ServerContext) async throws
        -> Kindred.Common.V1.DeliverEventsResponse
    {
        try await EventInbox.deliver(request, from: Self.eventProducers, access: self.access, context) {
            try await self.applyEvents($0, from: $1)
        }
    }

    /// The producers whose events chat applies (``EventSubscriptions``).
    static let eventProducers = EventSubscriptions.producers(of: "chat") ?? []

    /// Applies `producer`'s events (from `DeliverEvents` or the JetStream bus); returns the ids to acknowledge.
    func applyEvents(_ events: [Kindred.Common.V1.Event], from producer: String) async throws -> [String] {
        try await self.inbox.process(events, from: producer) { self.effect(of: $0) }
    }

    /// One event's effect, in the inbox's transaction, decided by its type (the kit's ``EventSubscriptions`` entry
    /// for chat lists the same types); nil for an event chat does not apply.
    func effect(of event: Kindred.Common.V1.Event) -> EventInbox.Effect? {
        let subject = event.userId.lowercased()
        switch event.payload {
        case .matchCreated(let match)?:
            return { transaction in try await self.open(match, of: event, in: transaction) }
        case .matchEnded(let ended)?:
            return { transaction in
                guard UUIDv7.isValid(ended.matchId) else { return }
                let endedBy = UUIDv7.isValid(ended.endedByUserId) ? ended.endedByUserId.lowercased() : nil
                _ = try await self.closeThread(
                    ended.matchId.lowercased(), reason: ended.reason, endedBy: endedBy, in: transaction)
            }
        case .userBlocked(let blocked)?:
            return { transaction in
                guard UUIDv7.isValid(subject), UUIDv7.isValid(blocked.blockedUserId) else { return }
                let open = try await self.threads.openThreads(
                    between: subject, and: blocked.blockedUserId.lowercased(), in: transaction)
                for thread in open {
                    _ = try await self.closeThread(thread, reason: .blocked, endedBy: subject, in: transaction)
                }
            }
        case .accountDeactivated?:
            return { transaction in
                guard UUIDv7.isValid(subject) else { return }
                try await self.users.setDeactivated(subject, true, in: transaction)
            }
        case .accountReactivated?:
            return { transaction in
                guard UUIDv7.isValid(subject) else { return }
                try await self.users.setDeactivated(subject, false, in: transaction)
            }
        case .accountDeleted?:
            return { transaction in
                guard UUIDv7.isValid(subject) else { return }
                try await self.erase(subject, in: transaction)
            }
        case .communityUpdated(let update)?:
            return { transaction in
                guard let community = update.community, !community.communityId.isEmpty else { return }
                try await self.communities.upsert(community, in: transaction)
            }
        default:
            return nil  // irrelevant here: acknowledged without a transaction
        }
    }

    /// MatchCreated opens the thread; an event without a valid pair is ignored (logged).
    private func open(
        _ match: Kindred.Common.V1.MatchCreated, of event: Kindred.Common.V1.Event, in transaction: PostgresTransaction
    ) async throws {
        guard let users = Self.pair(match.userIds), UUIDv7.isValid(match.matchId) else {
            self.logger.error("MatchCreated without a valid pair: ignored", metadata: ["events.id": "\(event.eventId)"])
            return
        }
        let initiator =
            users.contains(match.initiatorUserId.lowercased()) ? match.initiatorUserId.lowercased() : users[0]
        _ = try await self.openThread(
            matchID: match.matchId.lowercased(), users: users, communityID: event.communityId, initiator: initiator,
            mode: match.mode, createdUnixMs: match.createdUnixMs > 0 ? match.createdUnixMs : event.occurredUnixMs,
            in: transaction)
    }

    /// Two distinct valid user ids, sorted.
    static func pair(_ ids: [String]) -> [String]? {
        let users = ids.map { $0.lowercased() }
        guard users.count == 2, users[0] != users[1], users.allSatisfy(UUIDv7.isValid) else { return nil }
        return users.sorted()
    }

    /// Account deletion: every thread the user took part in goes, with all its messages and positions and every
    /// log event about it (in both users' logs); the other side is told the thread ended; the user's own log
    /// and settings go. Afterwards `GetUserFootprint` counts zero for the user.
    func erase(_ user: String, in transaction: PostgresTransaction) async throws {
        let threads = try await self.threads.all(of: user, in: transaction)
        let others = Set(threads.map { $0.other(than: user) }).sorted()
        try await self.users.lock(([user] + others).sorted(), in: transaction)
        for thread in threads where thread.state == .open {
            var notice = Chat.ThreadClosedNotice()
            notice.threadId = thread.threadID
            notice.reason = .ended
            // Not tied to the thread row: it must outlive the erasure below.
            try await self.log.append(
                Self.event(.threadClosed(notice)), to: thread.other(than: user), threadID: nil, in: transaction)
        }
        let ids = threads.map(\.threadID)
        try await self.log.erase(user: user, threads: ids, in: transaction)
        try await self.threads.delete(ids, in: transaction)
        try await self.footprint.eraseMessagesAndReadStates(of: user, in: transaction)
        try await self.users.delete(user, in: transaction)
        try await self.presence.erase(user, in: transaction)
        // The user's messages still in chat's outbox go; notify gets chat's erasure after them.
        try await self.outbox.eraseUser(user, community: "", in: transaction)
    }

    /// `GetUserFootprint`: rows chat holds about a user, per kind (zeros included). Admins and services.
    func getUserFootprint(_ request: Kindred.Common.V1.GetUserFootprintRequest, _ context: ServerContext) async throws
        -> Kindred.Common.V1.GetUserFootprintResponse
    {
        try await self.access.requireAdminOrService(context)
        let user = try ChatValidation.id(request.userId, field: "user_id")
        return .init(counts: try await self.footprint.counts(of: user, in: self.database))
    }
}
