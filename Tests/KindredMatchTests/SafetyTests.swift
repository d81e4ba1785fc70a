import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredMatch
import KindredPostgres
import KindredProto
import KindredServiceKit
import Testing

/// Blocks, unmatch and reports; privacy of passes and blocks; who may touch which ids.
@Suite struct SafetyTests {
    @Test func blockHidesAtOnceAndEndsTheMatch() async throws {
        try await MatchHarness.with { h in
            try await h.community("dating")
            let m = try await h.members(3, community: "dating")
            try await h.swipe(m[0], m[1], .like)
            let match = try #require(try await h.swipe(m[1], m[0], .like).match)
            try await h.swipe(m[2], m[0], .like)
            let blocked = try await h.call(M.block, .with { $0.targetUserId = m[1].id }, token: m[0].token)
            #expect(blocked.endedMatchId == match.matchId)
            #expect(try await h.matches(m[0]).isEmpty)
            #expect(try await h.matches(m[1]).isEmpty)
            let again = try await h.call(M.block, .with { $0.targetUserId = m[1].id }, token: m[0].token)
            #expect(again.endedMatchId.isEmpty, "idempotent")
            let list = try await h.call(M.listBlocks, .init(), token: m[0].token)
            #expect(list.blocks.map(\.userId) == [m[1].id])
            #expect(try await h.call(M.listBlocks, .init(), token: m[1].token).blocks.isEmpty, "only own blocks")
            // The blocked side blocking back answers just like any block.
            #expect(try await h.call(M.block, .with { $0.targetUserId = m[0].id }, token: m[1].token).endedMatchId.isEmpty)
            let unseen = try await h.call(M.filterUnseen, .with {
                $0.viewerUserId = m[0].id
                $0.candidateUserIds = [m[1].id, m[2].id]
            }, token: testKeys.serviceToken("discovery"))
            #expect(unseen.unseenUserIds == [m[2].id])
            #expect(try await h.outboxCount("user.blocked") == 2)
            #expect(try await h.outboxCount("match.ended") == 1)
            try await h.call(M.unblock, .with { $0.targetUserId = m[1].id }, token: m[0].token)
            try await h.call(M.unblock, .with { $0.targetUserId = m[1].id }, token: m[0].token)
            #expect(try await h.outboxCount("user.unblocked") == 1)
            #expect(try await h.matches(m[0]).isEmpty, "unblock does not restore the match")
        }
    }

    /// Every answer the passed or blocked user can get says nothing of the pass or the block.
    @Test func passesAndBlocksAreInvisibleToTheOtherSide() async throws {
        try await MatchHarness.with { h in
            try await h.community("dating")
            let m = try await h.members(4, community: "dating")
            let (passer, passed, blocker, blocked) = (m[0], m[1], m[2], m[3])
            try await h.swipe(passer, passed, .pass)
            try await h.call(M.block, .with { $0.targetUserId = blocked.id }, token: blocker.token)
            let unknown = Member(id: try UUIDv7.generate(), community: "dating")

            // The passed user: swiping on the passer works as on anyone.
            #expect(try await h.swipe(passed, passer, .like).outcome == .recorded)
            #expect(try await h.call(M.listLikesReceived, .init(), token: passed.token).likes.isEmpty)
            let relation = try await h.call(M.getRelations, .with { $0.userIds = [passer.id] }, token: passed.token)
            #expect(relation.relations.first?.viewerSwipe == .like && relation.relations.first?.blocked == false)

            // The blocked user: the blocker is exactly as unknown (same code, same message, same reason).
            func failure(_ target: String) async -> (StatusCode?, String, String) {
                do {
                    _ = try await h.swipe(blocked, Member(id: target, community: "dating"), .like)
                    return (nil, "", "")
                } catch let error as RPCError {
                    return (error.code, error.message, error.errorDetail?.reason ?? "")
                } catch { return (.unknown, "", "") }
            }
            let toBlocker = await failure(blocker.id)
            let toUnknown = await failure(unknown.id)
            #expect(toBlocker.0 == .notFound && toBlocker.0 == toUnknown.0)
            #expect(toBlocker.1 == toUnknown.1 && toBlocker.2 == toUnknown.2)
            #expect(try await h.call(M.listBlocks, .init(), token: blocked.token).blocks.isEmpty)
            // Their own relations and unseen list treat the blocker and the passer like a stranger.
            let relations = try await h.call(M.getRelations, .with {
                $0.userIds = [blocker.id, unknown.id]
            }, token: blocked.token).relations
            #expect(relations.map(\.blocked) == [false, false])
            let unseen = try await h.call(M.filterUnseen, .with {
                $0.candidateUserIds = [blocker.id, unknown.id]
            }, token: blocked.token)
            #expect(unseen.unseenUserIds == [blocker.id, unknown.id])
            let passedUnseen = try await h.call(M.filterUnseen, .with {
                $0.candidateUserIds = [passer.id]
            }, token: testKeys.userToken(passed.id, community: "dating"))
            #expect(passedUnseen.unseenUserIds == [], "passed liked the passer already: own swipe")
            let fresh = try await h.members(1, community: "dating")
            try await h.swipe(passer, fresh[0], .pass)
            let freshView = try await h.call(M.filterUnseen, .with { $0.candidateUserIds = [passer.id] }, token: fresh[0].token)
            #expect(freshView.unseenUserIds == [passer.id], "a pass on the viewer is not revealed to them")
            let discovery = try await h.call(M.filterUnseen, .with {
                $0.viewerUserId = fresh[0].id
                $0.candidateUserIds = [passer.id]
            }, token: testKeys.serviceToken("discovery"))
            #expect(discovery.unseenUserIds.isEmpty, "discovery hides them from each other")
            #expect(try await h.call(M.listLikesReceived, .init(), token: blocked.token).likes.isEmpty)
            #expect(try await h.matches(blocked).isEmpty)
            // Undo, unblock and block answer as for anyone.
            #expect(await h.code(M.undo, .init(), token: blocked.token) == .notFound)
            try await h.call(M.unblock, .with { $0.targetUserId = blocker.id }, token: blocked.token)
            // A report about the blocker is accepted as any other (nothing reveals the block).
            let report = try await h.call(M.reportUser, .with {
                $0.targetUserId = blocker.id
                $0.reason = .spam
            }, token: blocked.token)
            #expect(!report.reportId.isEmpty)
            #expect(await h.code(M.reportUser, .with {
                $0.targetUserId = unknown.id
                $0.reason = .spam
            }, token: blocked.token) == .notFound)
        }
    }

    @Test func unmatchEndsItForBothAndOnlyParticipantsMay() async throws {
        try await MatchHarness.with { h in
            try await h.community("dating")
            let m = try await h.members(3, community: "dating")
            try await h.swipe(m[0], m[1], .like)
            let match = try #require(try await h.swipe(m[1], m[0], .like).match)
            #expect(await h.code(M.unmatch, .with { $0.matchId = match.matchId }, token: m[2].token) == .notFound)
            try await h.call(M.unmatch, .with { $0.matchId = match.matchId }, token: m[1].token)
            try await h.call(M.unmatch, .with { $0.matchId = match.matchId }, token: m[0].token)
            #expect(try await h.matches(m[0]).isEmpty)
            #expect(try await h.matches(m[1]).isEmpty)
            #expect(try await h.outboxCount("match.ended") == 1)
            #expect(try await h.call(M.listLikesReceived, .init(), token: m[0].token).likes.isEmpty)
            // After an unmatch a swipe answers exactly as after a block, and as for an unknown user (the policy's
            // `unmatched`): before, it replayed the first like.
            for (swiper, target) in [(m[0], m[1]), (m[1], m[0])] {
                do {
                    _ = try await h.swipe(swiper, target, .like)
                    Issue.record("a swipe after the unmatch succeeded")
                } catch let error as RPCError {
                    #expect(error.code == .notFound && error.message == "No such user")
                }
            }
        }
    }

    /// Likes received follow the policy: a liker who paused (no longer eligible) leaves the list, and comes back
    /// when shown again.
    @Test func aLikerWhoIsNotShownLeavesLikesReceived() async throws {
        try await MatchHarness.with { h in
            try await h.community("dating")
            let m = try await h.members(2, community: "dating")
            try await h.swipe(m[1], m[0], .like)
            #expect(try await h.call(M.listLikesReceived, .init(), token: m[0].token).likes.map(\.userId) == [m[1].id])
            _ = try await h.deliver([h.profileEvent(m[1], eligible: false, version: 2)], from: "profile")
            let hidden = try await h.call(M.listLikesReceived, .init(), token: m[0].token)
            #expect(hidden.likes.isEmpty && hidden.totalCount == 0)
            _ = try await h.deliver([h.profileEvent(m[1], eligible: true, version: 3)], from: "profile")
            #expect(try await h.call(M.listLikesReceived, .init(), token: m[0].token).likes.map(\.userId) == [m[1].id])
        }
    }

    @Test func reportsReachAdminsAndResolveOnce() async throws {
        try await MatchHarness.with { h in
            try await h.community("dating")
            let m = try await h.members(2, community: "dating")
            let admin = Member(id: try UUIDv7.generate(), community: "dating")
            let adminToken = testKeys.userToken(admin.id, community: "dating", roles: ["user", "admin"])
            let request = MatchApi.ReportUserRequest.with {
                $0.targetUserId = m[1].id
                $0.reason = .harassment
                $0.details = "rude"
                $0.messageIds = ["msg-1"]
                $0.alsoBlock = true
                $0.idempotencyKey = "k1"
            }
            let report = try await h.call(M.reportUser, request, token: m[0].token)
            #expect(report.blocked)
            #expect(try await h.call(M.reportUser, request, token: m[0].token).reportId == report.reportId)
            var changed = request
            changed.details = "other"
            #expect(await h.code(M.reportUser, changed, token: m[0].token) == .invalidArgument)
            #expect(await h.code(M.reportUser, .with { $0.targetUserId = m[1].id; $0.reason = .other }, token: m[0].token)
                == .invalidArgument, "OTHER needs details")
            #expect(await h.code(M.listReports, .init(), token: m[0].token) == .permissionDenied)
            let listed = try await h.call(M.listReports, .with { $0.status = .open }, token: adminToken)
            #expect(listed.reports.map(\.reportId) == [report.reportId])
            #expect(listed.reports.first?.messageIds == ["msg-1"] && listed.reports.first?.reporterUserId == m[0].id)
            let read = try await h.call(M.getReport, .with { $0.reportId = report.reportId.uppercased() }, token: adminToken)
            #expect(read.report == listed.reports.first, "GetReport answers the row ListReports lists")
            #expect(await h.code(M.getReport, .with { $0.reportId = report.reportId }, token: m[0].token)
                == .permissionDenied, "the reporter is no admin")
            #expect(await h.code(M.getReport, .with { $0.reportId = report.reportId }, token: m[1].token)
                == .permissionDenied, "nor is the reported member")
            #expect(await h.code(M.getReport, .with { $0.reportId = "r1" }, token: adminToken) == .invalidArgument)
            #expect(await h.code(M.getReport, .with { $0.reportId = try! UUIDv7.generate() }, token: adminToken)
                == .notFound)
            let resolved = try await h.call(M.resolveReport, .with {
                $0.reportId = report.reportId
                $0.resolution = .warningSent
            }, token: adminToken)
            #expect(resolved.report?.status == .resolved && resolved.report?.resolvedByUserId == admin.id)
            #expect(try await h.call(M.resolveReport, .with {
                $0.reportId = report.reportId
                $0.resolution = .warningSent
            }, token: adminToken).report?.resolution == .warningSent, "idempotent")
            #expect(await h.code(M.resolveReport, .with {
                $0.reportId = report.reportId
                $0.resolution = .noAction
            }, token: adminToken) == .failedPrecondition)
            #expect(await h.code(M.resolveReport, .with {
                $0.reportId = try! UUIDv7.generate()
                $0.resolution = .noAction
            }, token: adminToken) == .notFound)
        }
    }

    /// Every RPC with another user's ids (or as another user): no success.
    @Test func callersOnlyTouchWhatIsTheirs() async throws {
        try await MatchHarness.with { h in
            try await h.community("dating")
            let m = try await h.members(3, community: "dating")
            try await h.swipe(m[0], m[1], .like)
            let match = try #require(try await h.swipe(m[1], m[0], .like).match)
            let pass = try await h.swipe(m[0], m[2], .pass)
            let intruder = m[2]
            #expect(await h.code(M.unmatch, .with { $0.matchId = match.matchId }, token: intruder.token) == .notFound)
            #expect(await h.code(M.undo, .with { $0.swipeId = pass.swipeId }, token: intruder.token) == .notFound)
            #expect(await h.code(M.filterUnseen, .with { $0.viewerUserId = m[0].id }, token: intruder.token)
                == .permissionDenied)
            #expect(await h.code(M.getRelations, .with {
                $0.viewerUserId = m[0].id
                $0.userIds = [m[1].id]
            }, token: intruder.token) == .permissionDenied)
            #expect(await h.code(M.getUserFootprint, .with { $0.userId = m[0].id }, token: intruder.token)
                == .permissionDenied)
            #expect(await h.code(M.listReports, .init(), token: intruder.token) == .permissionDenied)
            #expect(await h.code(M.getReport, .with { $0.reportId = try! UUIDv7.generate() }, token: intruder.token)
                == .permissionDenied)
            #expect(await h.code(M.resolveReport, .with { $0.reportId = try! UUIDv7.generate(); $0.resolution = .noAction },
                                 token: intruder.token) == .permissionDenied)
            #expect(await h.code(M.deliverEvents, .init(), token: intruder.token) == .permissionDenied)
            #expect(await h.code(M.deliverEvents, .init(), token: testKeys.serviceToken("chat")) == .permissionDenied)
            #expect(await h.code(M.filterUnseen, .with { $0.viewerUserId = m[0].id }, token: testKeys.serviceToken("auth"))
                == .permissionDenied)
            #expect(try await h.matches(intruder).isEmpty)
            #expect(try await h.call(M.unmatch, .with { $0.matchId = match.matchId }, token: m[0].token) == .init(),
                    "the owner still can")
        }
    }
}
