import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredMatch
import KindredPostgres
import KindredProto
import KindredServiceKit
import Testing

/// Swipes against a real PostgreSQL through the real server: matches, follows, idempotency, limits, undo.
@Suite struct SwipeTests {
    @Test func twoLikesMakeOneMatchForBoth() async throws {
        try await MatchHarness.with { h in
            try await h.community("dating")
            let m = try await h.members(2, community: "dating")
            let first = try await h.swipe(m[0], m[1], .like)
            #expect(first.outcome == .recorded && first.match == nil && !first.replayed)
            #expect(first.remainingLikes == 199)
            let second = try await h.swipe(m[1], m[0], .like)
            #expect(second.outcome == .matched)
            let match = try #require(second.match)
            #expect(match.otherUserId == m[0].id && match.direction == .mutual && match.mode == .mutual)
            #expect(try await h.matches(m[0]).map(\.matchId) == [match.matchId])
            #expect(try await h.matches(m[1]).map(\.matchId) == [match.matchId])
            #expect(try await h.matches(m[0]).first?.otherUserId == m[1].id)
            #expect(try await h.outboxCount("match.created") == 1)
            #expect(try await h.outboxCount("swipe.recorded") == 2)
        }
    }

    @Test func retriedSwipesReturnTheFirstOutcome() async throws {
        try await MatchHarness.with { h in
            try await h.community("dating")
            let m = try await h.members(2, community: "dating")
            try await h.swipe(m[0], m[1], .like)
            let matched = try await h.swipe(m[1], m[0], .like)
            let again = try await h.swipe(m[1], m[0], .like)
            #expect(again.replayed && again.outcome == .matched && again.swipeId == matched.swipeId)
            #expect(again.match?.matchId == matched.match?.matchId)
            let firstAgain = try await h.swipe(m[0], m[1], .like)
            #expect(firstAgain.replayed && firstAgain.outcome == .recorded, "the first like's own outcome")
            let differentAction = await h.code(M.swipe, .with {
                $0.targetUserId = m[1].id
                $0.action = .pass
            }, token: m[0].token)
            #expect(differentAction == .failedPrecondition)
            // Many concurrent retries of one swipe: one row, one id.
            let fresh = try await h.members(2, community: "dating")
            let ids = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<20 { group.addTask { try await h.swipe(fresh[0], fresh[1], .pass).swipeId } }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            #expect(ids.count == 1)
            #expect(try await h.outboxCount("swipe.recorded") == 3)
        }
    }

    @Test func invalidSwipesChangeNothing() async throws {
        try await MatchHarness.with { h in
            try await h.community("dating")
            let m = try await h.members(2, community: "dating")
            let other = try await h.members(1, community: "dogs")
            let hidden = try await h.members(1, community: "dating", eligible: false)
            func code(_ target: String, _ action: CommonApi.SwipeAction, as member: Member) async -> StatusCode? {
                await h.code(M.swipe, .with {
                    $0.targetUserId = target
                    $0.action = action
                }, token: member.token)
            }
            #expect(await code(m[0].id, .like, as: m[0]) == .invalidArgument)
            #expect(await code(m[1].id, .unspecified, as: m[0]) == .invalidArgument)
            #expect(await code("not-an-id", .like, as: m[0]) == .invalidArgument)
            #expect(await code(other[0].id, .like, as: m[0]) == .notFound, "another community")
            #expect(await code(hidden[0].id, .like, as: m[0]) == .notFound, "not eligible")
            #expect(await code(try UUIDv7.generate(), .like, as: m[0]) == .notFound, "unknown")
            #expect(await code(m[0].id, .like, as: hidden[0]) == .failedPrecondition, "a swiper needs a profile")
            #expect(await h.code(M.swipe, .with { $0.targetUserId = m[1].id; $0.action = .like }, token: "junk")
                == .unauthenticated)
            #expect(try await h.outboxCount("swipe.recorded") == 0)
            #expect(try await h.database.query("SELECT count(*) FROM swipes").scalar(Int64.self) == 0)
        }
    }

    @Test func oneWayLikesFollowAtOnceAndMutualFollowsAreMarked() async throws {
        try await MatchHarness.with { h in
            try await h.community("dogs", mode: .oneWay)
            let m = try await h.members(2, community: "dogs")
            let follow = try await h.swipe(m[0], m[1], .like)
            #expect(follow.outcome == .connected)
            #expect(follow.match?.direction == .outgoing)
            #expect(try await h.matches(m[1]).first?.direction == .incoming)
            let likes = try await h.call(M.listLikesReceived, .init(), token: m[1].token)
            #expect(likes.likes.map(\.userId) == [m[0].id] && likes.totalCount == 1, "a follower not followed back")
            let outgoing = try await h.call(M.listMatches, .with { $0.direction = .outgoing }, token: m[0].token)
            #expect(outgoing.matches.count == 1)
            let back = try await h.swipe(m[1], m[0], .like)
            #expect(back.outcome == .connected && back.match?.direction == .mutual)
            #expect(back.match?.matchId == follow.match?.matchId, "same connection")
            #expect(try await h.matches(m[0]).first?.direction == .mutual)
            #expect(try await h.matches(m[0]).first?.reciprocatedUnixMs ?? 0 > 0)
            #expect(try await h.call(M.listLikesReceived, .init(), token: m[1].token).likes.isEmpty)
            #expect(try await h.outboxCount("match.created") == 1)
        }
    }

    @Test func dailyLikeLimitAnswersWhenItResets() async throws {
        try await MatchHarness.with { h in
            try await h.community("dating", likes: 3)
            let m = try await h.members(6, community: "dating")
            for target in m[1...3] { try await h.swipe(m[0], target, .like) }
            do {
                try await h.swipe(m[0], m[4], .like)
                Issue.record("a fourth like must be refused")
            } catch let error as RPCError {
                #expect(error.code == .resourceExhausted)
                #expect(error.errorDetail?.reason == "LIKE_LIMIT_REACHED")
                let retry = error.errorDetail?.retryAfterMs ?? 0
                #expect(retry > 86_000_000 && retry <= 86_400_000, "resets when the first like leaves the window")
            }
            #expect(try await h.swipe(m[0], m[4], .pass).outcome == .recorded, "passes are not limited")
            #expect(try await h.swipe(m[0], m[1], .like).replayed, "a replay is not a new like")
        }
    }

    @Test func undoTakesBackTheLastPassWithinWindowAndLimit() async throws {
        try await MatchHarness.with { h in
            try await h.community("dating", undoWindow: 300, undos: 1)
            let m = try await h.members(4, community: "dating")
            let pass = try await h.swipe(m[0], m[1], .pass)
            let undo = try await h.call(M.undo, .init(), token: m[0].token)
            #expect(undo.swipeId == pass.swipeId && undo.targetUserId == m[1].id && undo.remainingUndos == 0)
            let retried = try await h.call(M.undo, .with { $0.swipeId = pass.swipeId }, token: m[0].token)
            #expect(retried.swipeId == pass.swipeId, "idempotent with the swipe id")
            #expect(try await h.swipe(m[0], m[1], .like).outcome == .recorded, "unseen again: a new decision")
            // The last swipe is a like now.
            #expect(await h.code(M.undo, .init(), token: m[0].token) == .failedPrecondition)
            try await h.swipe(m[0], m[2], .pass)
            do {
                _ = try await h.call(M.undo, .init(), token: m[0].token)
                Issue.record("the daily undo limit is 1")
            } catch let error as RPCError {
                #expect(error.code == .resourceExhausted && error.errorDetail?.reason == "UNDO_LIMIT_REACHED")
            }
            #expect(await h.code(M.undo, .init(), token: m[3].token) == .notFound, "no swipe")
            #expect(try await h.outboxCount("swipe.undone") == 1)
        }
    }

    @Test func undoWindowCloses() async throws {
        try await MatchHarness.with { h in
            try await h.community("dating", undoWindow: 1)
            let m = try await h.members(2, community: "dating")
            try await h.swipe(m[0], m[1], .pass)
            // Age the pass instead of waiting: the window is measured from swiped_at.
            try await h.database.execute("UPDATE swipes SET swiped_at = swiped_at - interval '2 seconds'")
            #expect(await h.code(M.undo, .init(), token: m[0].token) == .failedPrecondition)
        }
    }
}
