import KindredGRPC
import Testing

@testable import KindredMatch

/// A swipe on a member the swiper's deck could not show (`SwipeCommand.deckCouldShow`, discovery's answer) in the
/// group-commit batch, without I/O: refused exactly as for an unknown user, except a replay of the swiper's own
/// swipe and a swipe on an existing match.
@Suite struct SwipeReachTests {
    static let (me, other, community) = ("a", "b", "dating")

    static func facts(pair: PairState = PairState(), mode: MatchMode = .mutual, targetKnown: Bool = true) -> SwipeFacts
    {
        var facts = SwipeFacts()
        facts.swiperCommunity = community
        facts.swiperEligible = true
        if targetKnown {
            facts.targetCommunity = community
            facts.targetEligible = true
        }
        facts.mode = mode
        facts.pair = pair
        return facts
    }

    static func outcome(_ kind: SwipeKind, shown: Bool, _ facts: SwipeFacts) throws -> Result<SwipeReply, MatchError> {
        var next = 0
        let command = SwipeCommand(
            swiper: me,
            community: community,
            target: other,
            kind: kind,
            surface: "",
            deckCouldShow: shown
        )
        let batch = SwipeBatch(
            commands: [command],
            facts: [facts],
            nowUnixMs: 1_000,
            ids: {
                next += 1; return "id\(next)"
            }
        )
        #expect(batch.outcomes.count == 1)
        if case .failure = batch.outcomes[0] { #expect(batch.newSwipes.isEmpty && batch.events.isEmpty) }
        return batch.outcomes[0]
    }

    static func failure(_ result: Result<SwipeReply, MatchError>) -> (String, String)? {
        guard case .failure(let error) = result else { return nil }
        return ("\(error.rpcError.code)", error.message)
    }

    static let earlierLike = SwipeRecord(id: "s0", kind: .like, swipedUnixMs: 1, outcome: .recorded, matchID: nil)

    @Test("Out of reach with nothing between them: NOT_FOUND, the same answer as an unknown user")
    func outOfReachIsUnknown() throws {
        let unknown = Self.failure(try Self.outcome(.like, shown: true, Self.facts(targetKnown: false)))
        #expect(unknown != nil)
        for kind in [SwipeKind.like, .pass] {
            #expect(
                Self.failure(try Self.outcome(kind, shown: false, Self.facts())).map { [$0.0, $0.1] }
                    == unknown.map { [$0.0, $0.1] }
            )
            #expect(Self.failure(try Self.outcome(kind, shown: false, Self.facts(mode: .oneWay))) != nil)
        }
        guard case .success(let reply) = try Self.outcome(.like, shown: true, Self.facts()) else {
            Issue.record("a like within reach is recorded")
            return
        }
        #expect(!reply.replayed)
    }

    @Test("A retry replays even if the target is out of reach now; another action is ALREADY_SWIPED as before")
    func retriesReplay() throws {
        guard
            case .success(let reply) = try Self.outcome(
                .like,
                shown: false,
                Self.facts(pair: PairState(mine: Self.earlierLike))
            )
        else {
            Issue.record("a repeated like replays")
            return
        }
        #expect(reply.replayed && reply.swipe.id == "s0")
        #expect(
            Self.failure(try Self.outcome(.pass, shown: false, Self.facts(pair: PairState(mine: Self.earlierLike))))?.1
                == "You already swiped on this person"
        )
    }

    @Test("An existing connection keeps what it allows: following back an incoming follow")
    func existingMatch() throws {
        let incoming = MatchRecord(id: "m0", mode: .oneWay, initiator: Self.other, createdUnixMs: 1)
        let facts = Self.facts(pair: PairState(theirs: .like, match: incoming), mode: .oneWay)
        guard case .success(let reply) = try Self.outcome(.like, shown: false, facts) else {
            Issue.record("following back is allowed")
            return
        }
        #expect(reply.swipe.outcome == .connected && reply.match?.reciprocatedUnixMs != nil)
    }

    @Test("Liking back a member who liked the swiper makes the match even out of the swiper's reach")
    func likingBackMatches() throws {
        guard case .success(let reply) = try Self.outcome(.like, shown: false, Self.facts(pair: PairState(theirs: .like)))
        else {
            Issue.record("a like back on a liker is a match")
            return
        }
        #expect(reply.swipe.outcome == .matched && reply.match != nil)
        // A pass on the swiper says nothing: out of reach it answers as for anyone out of reach.
        let passedOn = Self.failure(try Self.outcome(.like, shown: false, Self.facts(pair: PairState(theirs: .pass))))
        #expect(passedOn.map { [$0.0, $0.1] } == Self.failure(try Self.outcome(.like, shown: false, Self.facts())).map { [$0.0, $0.1] })
        #expect(passedOn != nil)
    }

    @Test("A block still answers NOT_FOUND whatever discovery said")
    func blocked() throws {
        #expect(
            Self.failure(try Self.outcome(.like, shown: true, Self.facts(pair: PairState(blocked: true))))?.1
                == "No such user"
        )
        #expect(
            Self.failure(try Self.outcome(.like, shown: false, Self.facts(pair: PairState(blocked: true))))?.1
                == "No such user"
        )
    }
}

/// The real `DiscoveryCandidateCheck` with no discovery to answer: swipes fail closed.
@Suite struct SwipeCheckUnavailableTests {
    @Test("Discovery unreachable: UNAVAILABLE with a retry hint, and nothing is recorded")
    func failsClosed() async throws {
        // Port 9 (discard) on loopback: nothing listens, the connection is refused at once.
        try await MatchHarness.with(
            settings: ["KINDRED_MATCH_DISCOVERY_ADDRESS": "127.0.0.1:9", "KINDRED_MATCH_DISCOVERY_TIMEOUT_MS": "300"]
        ) { h in
            try await h.community("dating")
            let m = try await h.members(2, community: "dating")
            for kind in [CommonApi.SwipeAction.like, .pass] {
                do {
                    _ = try await h.call(
                        M.swipe,
                        .with {
                            $0.targetUserId = m[1].id; $0.action = kind
                        },
                        token: m[0].token
                    )
                    Issue.record("a swipe without discovery's answer must be refused")
                } catch let error as RPCError {
                    #expect(error.code == .unavailable)
                    #expect((error.errorDetail?.retryAfterMs ?? 0) > 0)
                }
            }
            #expect(try await h.outboxCount("swipe.recorded") == 0)
        }
    }
}
