import Foundation
import KindredGRPC
import KindredIdentity
import KindredProfile
import KindredProto
import KindredServiceKit
import Testing

/// GetProfiles shows a member not matched with the viewer only if discovery's card check (`CandidateCheck` in card mode: the viewer's
/// deck could show them, or they liked the viewer) lists them; one check per request, none for matches or the
/// viewer's own card, none for a page the gateway vouches for; UNAVAILABLE when the check cannot answer.
@Suite struct CardCheckTests {
    @Test func cardsOutsideThePreferencesAreMissingAndTheCheckIsOneCallPerPage() async throws {
        try await ProfileHarness.with { h in
            let (ada, bob, carl, dora) = (h.user("dating"), h.user("dating"), h.user("dating"), h.user("dating"))
            for (user, name) in [(ada, "Ada"), (bob, "Bob"), (carl, "Carl"), (dora, "Dora")] {
                try await h.createProfile(user, h.datingFields(name))
                try await h.addPhotoRows(user.id, count: 2)
            }
            FakeCardCheck.state.withLock { $0.outside[bob.id] = [ada.id, dora.id] }
            func calls(_ viewer: ProfileHarness.User) -> Int {
                FakeCardCheck.state.withLock { $0.calls[viewer.id] ?? 0 }
            }
            func cards(
                _ viewer: ProfileHarness.User, _ ids: [String], as metadata: Metadata? = nil,
                source: V1.CardSource = .unspecified
            ) async throws -> V1.GetProfilesResponse {
                try await h.client.unary(
                    P.getProfiles,
                    .with {
                        $0.userIds = ids
                        $0.source = source
                        if metadata != nil { $0.viewerUserId = viewer.id }
                    }, metadata: metadata ?? viewer.metadata)
            }

            // Ada and Dora are outside Bob's preferences: missing, as an unknown id; Carl and Bob's own card show.
            var seen = try await cards(bob, [ada.id, carl.id, bob.id, dora.id])
            #expect(seen.profiles.map(\.userId) == [carl.id, bob.id])
            #expect(seen.missingUserIds == [ada.id, dora.id])
            #expect(calls(bob) == 1, "one check for the page")
            // The viewer's own card alone asks nothing.
            _ = try await cards(bob, [bob.id])
            #expect(calls(bob) == 1)

            // A match is shown whatever the preferences, without a check (ListMatches' cards cost nothing).
            let matchID = try UUIDv7.generate()
            let event = Kindred.Common.V1.Event.with {
                $0.eventId = try! UUIDv7.generate()
                $0.producer = "match"
                $0.userId = ada.id
                $0.communityId = "dating"
                $0.sequence = Int64(Date().timeIntervalSince1970 * 1000)
                $0.payload = .matchCreated(.with { $0.matchId = matchID; $0.userIds = [ada.id, bob.id].sorted() })
            }
            _ = try await h.client.unary(P.deliverEvents, .with { $0.events = [event] }, metadata: h.service("match"))
            seen = try await cards(bob, [ada.id])
            #expect(seen.profiles.map(\.userId) == [ada.id])
            #expect(calls(bob) == 1, "a match needs no check")

            // The gateway vouches for its deck and likes-received pages (its service token): no check. The same
            // claim from another caller (a user, another service) is ignored: checked.
            seen = try await cards(bob, [dora.id], as: h.service("gateway"), source: .deck)
            #expect(seen.profiles.map(\.userId) == [dora.id])
            seen = try await cards(bob, [dora.id], as: h.service("gateway"), source: .likesReceived)
            #expect(seen.profiles.map(\.userId) == [dora.id])
            #expect(calls(bob) == 1)
            #expect(try await cards(bob, [dora.id], as: h.service("gateway")).missingUserIds == [dora.id])
            #expect(try await cards(bob, [dora.id], as: h.service("match"), source: .deck).missingUserIds == [dora.id])
            #expect(try await cards(bob, [dora.id], source: .deck).missingUserIds == [dora.id])
            #expect(calls(bob) == 4)

            // Fail closed: without an answer from discovery, UNAVAILABLE (never an unchecked card); matches and
            // the viewer's own card still answer.
            FakeCardCheck.state.withLock { _ = $0.unavailable.insert(bob.id) }
            #expect(await statusCode { _ = try await cards(bob, [carl.id]) } == .unavailable)
            #expect(try await cards(bob, [ada.id, bob.id]).profiles.count == 2)
        }
    }
}
