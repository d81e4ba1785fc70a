import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit

extension AuthService {
    /// `DeliverEvents`: what auth learns from profile, each effect committed with the event id. CommunityUpdated
    /// says whether the community takes new members (`sign_up_open`); every other event is acknowledged unused.
    func deliverEvents(_ request: Kindred.Common.V1.DeliverEventsRequest, _ context: ServerContext) async throws
        -> Kindred.Common.V1.DeliverEventsResponse
    {
        try await EventInbox.deliver(request, from: Self.eventProducers, access: self.access, context) {
            try await self.applyEvents($0, from: $1)
        }
    }

    /// The producers whose events auth applies (``EventSubscriptions``).
    static let eventProducers = EventSubscriptions.producers(of: "auth") ?? []

    /// Applies `producer`'s events (from `DeliverEvents` or the JetStream bus); returns the ids to acknowledge.
    func applyEvents(_ events: [Kindred.Common.V1.Event], from producer: String) async throws -> [String] {
        try await self.inbox.process(events, from: producer) { self.effect(of: $0) }
    }

    /// What `event` does to auth, decided by its type (the kit's ``EventSubscriptions`` entry for auth lists the
    /// same types); nil for an event auth does not apply.
    func effect(of event: Kindred.Common.V1.Event) -> EventInbox.Effect? {
        guard case .communityUpdated(let update)? = event.payload else { return nil }
        return { transaction in
            guard let community = update.community, !community.communityId.isEmpty else { return }
            try await self.communities.upsert(community, in: transaction)
        }
    }

    /// Refuses a new member of a community closed to sign-ups. The answer depends only on the community, never on
    /// whether an address has an account.
    func requireSignUpsOpen(_ community: String) async throws {
        guard try await self.communities.isOpen(community, in: self.database) else { throw AuthError.signUpClosed }
    }
}
