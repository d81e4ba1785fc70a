import KindredServiceKit
import Testing

@Suite struct VisibilityPolicyTests {
    typealias Facts = MemberRelation.Facts

    /// The rules, written out once per relation: what the viewer may see and do (everything else is refused).
    static let table: [(MemberRelation, Set<MemberView>, Set<MemberAction>)] = [
        (.none, [.card, .distance, .likesReceived, .deck, .search], [.swipe, .report, .block]),
        (.reported, [.card, .distance, .likesReceived, .deck, .search], [.swipe, .report, .block]),
        (.liked, [.card, .distance, .search], [.swipe, .report, .block]),
        (.passed, [.card, .distance, .search], [.swipe, .report, .block]),
        (.passedOn, [.card, .distance, .search], [.swipe, .report, .block]),
        (.matched, [.card, .distance, .thread, .matches, .search], [.swipe, .message, .report, .block]),
        (.connected, [.card, .distance, .thread, .likesReceived, .matches, .search], [.swipe, .message, .report, .block]),
        (.unmatched, [], [.report, .block]),
        (.blocked, [], [.report, .block]),
        (.blockedBy, [], [.report, .block]),
        (.deactivated, [], [.report, .block]),
        (.ineligible, [], [.report, .block]),
        (.outsidePreferences, [], [.report, .block]),
        (.deleted, [], []),
        (.otherCommunity, [], []),
    ]

    @Test func tableCoversEveryRelation() {
        #expect(Set(Self.table.map(\.0)) == Set(MemberRelation.allCases))
        #expect(Self.table.count == MemberRelation.allCases.count)
    }

    @Test(arguments: Self.table.map { $0.0 })
    func answersAsTheTableSays(relation: MemberRelation) throws {
        let row = try #require(Self.table.first { $0.0 == relation })
        for view in MemberView.allCases {
            #expect(VisibilityPolicy.allows(view, relation) == row.1.contains(view), "\(relation) \(view)")
        }
        for action in MemberAction.allCases {
            #expect(VisibilityPolicy.allows(action, relation) == row.2.contains(action), "\(relation) \(action)")
        }
    }

    /// The secrecy rules: a pass on the viewer changes nothing but the deck; a block by the member, and the
    /// viewer's own block, answer exactly as an unmatch; a report as nothing at all.
    @Test func passesBlocksAndReportsCannotBeTold() {
        for view in MemberView.allCases where view != .deck {
            #expect(VisibilityPolicy.allows(view, .passedOn) == VisibilityPolicy.allows(view, .liked), "\(view)")
        }
        for view in MemberView.allCases {
            #expect(VisibilityPolicy.allows(view, .blockedBy) == VisibilityPolicy.allows(view, .unmatched))
            #expect(VisibilityPolicy.allows(view, .blocked) == VisibilityPolicy.allows(view, .unmatched))
            #expect(VisibilityPolicy.allows(view, .reported) == VisibilityPolicy.allows(view, .none))
        }
        for action in MemberAction.allCases {
            #expect(VisibilityPolicy.allows(action, .passedOn) == VisibilityPolicy.allows(action, .liked))
            #expect(VisibilityPolicy.allows(action, .blockedBy) == VisibilityPolicy.allows(action, .unmatched))
            #expect(VisibilityPolicy.allows(action, .blocked) == VisibilityPolicy.allows(action, .unmatched))
            #expect(VisibilityPolicy.allows(action, .reported) == VisibilityPolicy.allows(action, .none))
        }
    }

    /// Facts → relation, including the precedence when several facts hold.
    static let facts: [(Facts, MemberRelation)] = [
        (Facts(), .none),
        (Facts(exists: false, blockedByViewer: true, match: .matched), .deleted),
        (Facts(sameCommunity: false, match: .matched), .otherCommunity),
        (Facts(deactivated: true, match: .matched), .deactivated),
        (Facts(blockedByViewer: true, blockedByMember: true, match: .ended), .blocked),
        (Facts(blockedByMember: true, match: .ended), .blockedBy),
        (Facts(match: .ended, viewerSwipe: .like, memberSwipe: .like), .unmatched),
        (Facts(eligible: false, match: .matched), .matched),
        (Facts(withinPreferences: false, match: .connected), .connected),
        (Facts(eligible: false, viewerSwipe: .like), .ineligible),
        (Facts(withinPreferences: false, memberSwipe: .pass), .outsidePreferences),
        (Facts(viewerSwipe: .like, memberSwipe: .pass), .liked),
        (Facts(viewerSwipe: .pass, memberSwipe: .like), .passed),
        (Facts(memberSwipe: .pass, reported: true), .passedOn),
        (Facts(memberSwipe: .like), .none),
        (Facts(reported: true), .reported),
    ]

    @Test(arguments: Self.facts)
    func relationFromFacts(facts: Facts, expected: MemberRelation) {
        #expect(MemberRelation(facts) == expected)
    }
}
