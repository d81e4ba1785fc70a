import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit

extension MatchService {
    /// Services that may read pair states for users (FilterUnseen, GetRelations).
    static let relationReaders: Set<String> = ["discovery", "gateway", "chat", "profile"]

    /// `FilterUnseen`: the candidates the viewer may still see, in request order.
    func filterUnseen(_ request: MatchApi.FilterUnseenRequest, _ context: ServerContext) async throws
        -> MatchApi.FilterUnseenResponse
    {
        let viewer = try await self.access.requireViewer(
            request.viewerUserId, context, services: Self.relationReaders)
        guard request.candidateUserIds.count <= 1000 else {
            throw MatchError.invalid("candidate_user_ids", "TOO_MANY", "at most 1000 ids")
        }
        // Ids that are not user ids cannot be anyone's: they are simply not returned.
        let candidates = request.candidateUserIds.map { $0.lowercased() }.filter(UUIDv7.isValid)
        var response = MatchApi.FilterUnseenResponse()
        guard !candidates.isEmpty else { return response }
        response.unseenUserIds = try await self.matches.unseen(
            viewer: viewer.id, candidates: candidates, othersDecisions: viewer.isService, on: self.database)
        return response
    }

    /// `GetRelations`: the pair state between the viewer and up to 100 users, in request order.
    func getRelations(_ request: MatchApi.GetRelationsRequest, _ context: ServerContext) async throws
        -> MatchApi.GetRelationsResponse
    {
        let viewer = try await self.access.requireViewer(
            request.viewerUserId, context, services: Self.relationReaders)
        guard (1...100).contains(request.userIds.count), Set(request.userIds).count == request.userIds.count else {
            throw MatchError.invalid("user_ids", "OUT_OF_RANGE", "1..100 distinct ids")
        }
        let valid = request.userIds.map { $0.lowercased() }.filter(UUIDv7.isValid)
        let known =
            valid.isEmpty
            ? [:]
            : try await self.matches.relations(
                viewer: viewer.id, others: valid, othersDecisions: viewer.isService, on: self.database)
        var response = MatchApi.GetRelationsResponse()
        response.relations = request.userIds.map { id in
            var relation = MatchApi.Relation()
            relation.userId = id
            guard let facts = known[id.lowercased()] else { return relation }
            relation.blocked = facts.blocked
            if let match = facts.match, !facts.blocked {
                let message = Self.matchMessage(match, viewer: viewer.id, other: id.lowercased())
                relation.matchId = message.matchId
                relation.direction = message.direction
            }
            relation.viewerSwipe = facts.swipe == 1 ? .like : (facts.swipe == 2 ? .pass : .unspecified)
            return relation
        }
        return response
    }

    /// `DeliverEvents`: auth's account events and profile's profile and community snapshots, each applied once
    /// (the kit's inbox) and in order per partition.
    func deliverEvents(_ request: CommonApi.DeliverEventsRequest, _ context: ServerContext) async throws
        -> CommonApi.DeliverEventsResponse
    {
        try await EventInbox.deliver(request, from: Self.eventProducers, access: self.access, context) {
            try await self.applyEvents($0, from: $1)
        }
    }

    /// The producers whose events match applies (``EventSubscriptions``).
    static let eventProducers = EventSubscriptions.producers(of: "match") ?? []

    /// Applies `producer`'s events (from `DeliverEvents` or the JetStream bus); returns the ids to acknowledge.
    func applyEvents(_ events: [CommonApi.Event], from producer: String) async throws -> [String] {
        try await self.inbox.process(events, from: producer) { self.effect(of: $0) }
    }

    /// One event's effect, in the inbox's transaction, decided by its type (the kit's ``EventSubscriptions`` entry
    /// for match lists the same types); nil for an event match does not apply. Malformed ids are ignored
    /// (acknowledged without effect).
    func effect(of event: CommonApi.Event) -> EventInbox.Effect? {
        let user = event.userId.lowercased()
        switch event.payload {
        case .accountDeactivated?:
            return { transaction in
                guard UUIDv7.isValid(user) else { return }
                try await self.directory.setDeactivated(
                    true, user: user, community: event.communityId, in: transaction)
            }
        case .accountReactivated?:
            return { transaction in
                guard UUIDv7.isValid(user) else { return }
                try await self.directory.setDeactivated(
                    false, user: user, community: event.communityId, in: transaction)
            }
        case .accountDeleted?:
            return { transaction in
                guard UUIDv7.isValid(user) else { return }
                try await self.erase(user, announcedBy: event, in: transaction)
            }
        case .profileUpdated(let updated)?:
            return { transaction in try await self.upsertMember(updated.snapshot, in: transaction) }
        case .locationChanged(let changed)?:
            return { transaction in try await self.upsertMember(changed.snapshot, in: transaction) }
        case .communityUpdated(let updated)?:
            return { transaction in
                guard let community = updated.community, !community.communityId.isEmpty else { return }
                try await self.directory.upsertCommunity(community, in: transaction)
            }
        default:
            return nil  // not for match: acknowledged without a transaction
        }
    }

    /// An account deletion: the user's data goes, and each remaining user's MatchEnded goes to their partition;
    /// auth's event also erases the user's own events (their swipes and blocks still in match's outbox go, and
    /// consumers get match's erasure after them). Partitions in ascending key, the outbox's lock order
    /// (Outbox.swift): `ended` comes sorted by the other user, and the user's own partition takes its place among
    /// them.
    private func erase(_ user: String, announcedBy event: CommonApi.Event, in transaction: PostgresTransaction)
        async throws
    {
        let ended = try await UserDataStore().erase(user, in: transaction)
        var erasing = event.producer == "auth"
        for match in ended {
            if erasing && user < match.other {
                try await self.outbox.eraseUser(user, community: event.communityId, in: transaction)
                erasing = false
            }
            var ending = CommonApi.Event()
            ending.userId = match.other
            ending.communityId = event.communityId
            ending.payload = .matchEnded(
                .with {
                    $0.matchId = match.matchID
                    $0.userIds = [user, match.other].sorted()
                    $0.reason = .accountDeleted
                })
            try await self.outbox.append(ending, in: transaction)
        }
        if erasing {
            try await self.outbox.eraseUser(user, community: event.communityId, in: transaction)
        }
    }

    /// A member snapshot from profile (ProfileUpdated, LocationChanged); one without a valid user id is ignored.
    private func upsertMember(_ snapshot: Kindred.Common.V1.CandidateSnapshot?, in transaction: PostgresTransaction)
        async throws
    {
        guard var snapshot, UUIDv7.isValid(snapshot.userId.lowercased()) else { return }
        snapshot.userId = snapshot.userId.lowercased()
        try await self.directory.upsertMember(snapshot, in: transaction)
    }

    /// `GetUserFootprint` (admin or service): rows match holds about a user, per kind, zeros included.
    func getUserFootprint(_ request: CommonApi.GetUserFootprintRequest, _ context: ServerContext) async throws
        -> CommonApi.GetUserFootprintResponse
    {
        try await self.access.requireAdminOrService(context)
        let user = try Self.userID(request.userId, field: "user_id")
        return .init(counts: try await UserDataStore().footprint(user, on: self.database))
    }
}
