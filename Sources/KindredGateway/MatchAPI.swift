import KindredGRPC
import KindredProto

/// `kindred.api.v1.MatchService`: matches and connections, likes received, blocks and reports, served by the
/// match service; lists come back as cards from the profile service's GetProfiles, fetched in the same call
/// with the part deadline (`KINDRED_GATEWAY_PART_TIMEOUT_MS`). While profile is unreachable (or not deployed)
/// the answer carries what match knows (ids, times, directions) and names "profiles" in `unavailable_parts`;
/// "chat" (last message, unread counts) is named until the chat service is wired in.
struct MatchAPI: GRPCService {
    let gateway: Gateway

    func register(in router: inout GRPCRouter) {
        typealias P = Api.MatchService.Method
        typealias M = MatchApi.MatchService.Method
        let gateway = self.gateway
        router.unary(P.listMatches) { request, context in
            let caller = try await gateway.admit(context, .user)
            return try await gateway.listMatches(request, caller)
        }
        router.unary(P.unmatch) { request, context in
            let caller = try await gateway.admit(context, .user)
            _ = try await gateway.requireMatch().call(M.unmatch, .with { $0.matchId = request.matchId }, as: caller)
            return Api.UnmatchResponse()
        }
        router.unary(P.listLikesReceived) { request, context in
            let caller = try await gateway.admit(context, .user)
            return try await gateway.listLikesReceived(request, caller)
        }
        router.unary(P.block) { request, context in
            let caller = try await gateway.admit(context, .user)
            let response = try await gateway.requireMatch().call(
                M.block, .with { $0.targetUserId = request.targetUserId }, as: caller)
            return .with { $0.endedMatchId = response.endedMatchId }
        }
        router.unary(P.unblock) { request, context in
            let caller = try await gateway.admit(context, .user)
            _ = try await gateway.requireMatch().call(M.unblock, .with { $0.targetUserId = request.targetUserId }, as: caller)
            return Api.UnblockResponse()
        }
        router.unary(P.listBlocks) { request, context in
            let caller = try await gateway.admit(context, .user)
            let response = try await gateway.requireMatch().call(
                M.listBlocks,
                .with {
                    $0.pageSize = request.pageSize
                    $0.pageToken = request.pageToken
                }, as: caller)
            // Names of blocked members are not shown: profile hides blocked pairs from each other.
            var answer = Api.ListBlocksResponse()
            answer.blocks = response.blocks.map { blocked in
                .with {
                    $0.userId = blocked.userId
                    $0.blockedUnixMs = blocked.blockedUnixMs
                }
            }
            answer.nextPageToken = response.nextPageToken
            return answer
        }
        router.unary(P.reportUser) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = MatchApi.ReportUserRequest()
            forwarded.targetUserId = request.targetUserId
            forwarded.reason = request.reason
            forwarded.details = request.details
            forwarded.messageIds = request.messageIds
            forwarded.photoIds = request.photoIds
            forwarded.alsoBlock = request.alsoBlock
            forwarded.idempotencyKey = request.idempotencyKey
            let response = try await gateway.requireMatch().call(M.reportUser, forwarded, as: caller)
            return .with {
                $0.reportId = response.reportId
                $0.blocked = response.blocked
            }
        }
    }
}

extension Gateway {
    func listMatches(_ request: Api.ListMatchesRequest, _ caller: Caller) async throws -> Api.ListMatchesResponse {
        var forwarded = MatchApi.ListMatchesRequest()
        forwarded.direction = MatchApi.ConnectionDirection(converting: request.direction)
        forwarded.pageSize = request.pageSize
        forwarded.pageToken = request.pageToken
        let response = try await self.requireMatch().call(
            MatchApi.MatchService.Method.listMatches, forwarded, as: caller)
        // Cards (profile) and the last message with the unread count (chat), side by side, each in the part
        // deadline: a missing part degrades the list, it does not fail it.
        async let cardsPart = self.cards(for: response.matches.map(\.otherUserId), caller)
        async let threadsPart = self.threadSummaries(for: response.matches.map(\.matchId), caller)
        let (cards, threads) = await (cardsPart, threadsPart)
        var answer = Api.ListMatchesResponse()
        answer.matches = response.matches.map { match in
            var summary = Api.MatchSummary(match, profile: cards.cards[match.otherUserId])
            if let thread = threads.threads[match.matchId] {
                summary.lastMessage = thread.lastMessage.map(Api.ChatMessage.init)
                summary.unreadCount = thread.unreadCount
            }
            return summary
        }
        answer.nextPageToken = response.nextPageToken
        answer.unavailableParts = (cards.complete ? [] : ["profiles"]) + (threads.complete ? [] : ["chat"])
        return answer
    }

    /// Chat's summaries (last message, unread count) of the caller's threads `ids` (thread id = match id),
    /// within the part deadline; `complete` is false when chat is not deployed, failed or was late.
    func threadSummaries(for ids: [String], _ caller: Caller) async -> (threads: [String: ChatApi.ChatThread], complete: Bool) {
        guard !ids.isEmpty else { return ([:], true) }
        guard let chat = self.chat else {
            self.metrics.partMissing("matches.chat")
            return ([:], false)
        }
        let fetched = await withinDeadline(self.configuration.partTimeout) {
            var request = ChatApi.GetThreadSummariesRequest()
            request.threadIds = ids
            let response = try await chat.call(ChatApi.ChatService.Method.getThreadSummaries, request, as: caller)
            return Dictionary(response.threads.map { ($0.threadId, $0) }) { first, _ in first }
        }
        guard let fetched else {
            self.metrics.partMissing("matches.chat")
            return ([:], false)
        }
        return (fetched, true)
    }

    func listLikesReceived(_ request: Api.ListLikesReceivedRequest, _ caller: Caller) async throws
        -> Api.ListLikesReceivedResponse
    {
        var forwarded = MatchApi.ListLikesReceivedRequest()
        forwarded.pageSize = request.pageSize
        forwarded.pageToken = request.pageToken
        let response = try await self.requireMatch().call(
            MatchApi.MatchService.Method.listLikesReceived, forwarded, as: caller)
        let cards = await self.cards(for: response.likes.map(\.userId), caller, source: .likesReceived)
        var answer = Api.ListLikesReceivedResponse()
        answer.likes = response.likes.map { like in
            var received = Api.ReceivedLike()
            received.userId = like.userId
            received.likedUnixMs = like.likedUnixMs
            received.profile = cards.cards[like.userId]
            return received
        }
        answer.nextPageToken = response.nextPageToken
        answer.totalCount = response.totalCount
        answer.unavailableParts = cards.complete ? [] : ["profiles"]
        return answer
    }

    // MARK: Admin

    func listReports(_ request: Api.ListReportsRequest, _ caller: Caller) async throws -> Api.ListReportsResponse {
        var forwarded = MatchApi.ListReportsRequest()
        forwarded.status = MatchApi.ReportStatus(converting: request.status)
        forwarded.reportedUserId = request.reportedUserId
        forwarded.communityId = request.communityId
        forwarded.pageSize = request.pageSize
        forwarded.pageToken = request.pageToken
        let response = try await self.requireMatch().call(MatchApi.MatchService.Method.listReports, forwarded, as: caller)
        return .with {
            $0.reports = response.reports.map(Api.ModerationReport.init)
            $0.nextPageToken = response.nextPageToken
        }
    }

    /// Match records the decision (and, for ACCOUNT_DEACTIVATED, deactivates the account through auth with the
    /// admin's own token). CONTENT_REMOVED with remove_photo_ids first deletes those of the reported member's
    /// photos through profile (`removeReportedPhotos`), so the report is resolved only once they are gone.
    func resolveReport(_ request: Api.ResolveReportRequest, _ caller: Caller) async throws -> Api.ResolveReportResponse {
        if !request.removePhotoIds.isEmpty { try await self.removeReportedPhotos(request, caller) }
        var forwarded = MatchApi.ResolveReportRequest()
        forwarded.reportId = request.reportId
        forwarded.resolution = MatchApi.ReportResolution(converting: request.resolution)
        forwarded.note = request.note
        let response = try await self.requireMatch().call(
            MatchApi.MatchService.Method.resolveReport, forwarded, as: caller)
        return .with { $0.report = response.report.map(Api.ModerationReport.init) }
    }

    // MARK: Home

    /// Home's first page of matches (with cards when profile answers in time).
    func homeMatchesPart(_ request: Api.GetHomeRequest, _ caller: Caller) -> FanOut<Api.GetHomeResponse>.Part {
        guard self.match != nil else { return .init(name: "matches", essential: false, fetch: nil) }
        return .init(name: "matches", essential: false) {
            var list = Api.ListMatchesRequest()
            list.pageSize = request.matchesPageSize == 0 ? 10 : request.matchesPageSize
            let page = try await self.listMatches(list, caller)
            return { answer in
                answer.matches = page.matches
                answer.matchesNextPageToken = page.nextPageToken
            }
        }
    }

    /// Home's count of pending likes.
    func homeLikesPart(_ caller: Caller) -> FanOut<Api.GetHomeResponse>.Part {
        guard let match = self.match else { return .init(name: "likes", essential: false, fetch: nil) }
        return .init(name: "likes", essential: false) {
            let response = try await match.call(
                MatchApi.MatchService.Method.listLikesReceived, .with { $0.pageSize = 1 }, as: caller)
            return { $0.likesReceived = response.totalCount }
        }
    }
}

// MARK: Conversions (match and profile contracts → public API)

extension Api.MatchSummary {
    init(_ match: MatchApi.Match, profile: Api.ProfileCard?) {
        self.init()
        self.matchId = match.matchId
        self.direction = Api.ConnectionDirection(converting: match.direction)
        self.createdUnixMs = match.createdUnixMs
        // Always name the other member, even without the profile part.
        self.profile = profile ?? .with { $0.userId = match.otherUserId }
    }
}

extension Api.ModerationReport {
    init(_ report: MatchApi.Report) {
        self.init()
        self.reportId = report.reportId
        self.reporterUserId = report.reporterUserId
        self.reportedUserId = report.reportedUserId
        self.communityId = report.communityId
        self.reason = report.reason
        self.details = report.details
        self.messageIds = report.messageIds
        self.photoIds = report.photoIds
        self.status = Api.ReportStatus(converting: report.status)
        self.resolution = Api.ReportResolution(converting: report.resolution)
        self.resolutionNote = report.resolutionNote
        self.resolvedByUserId = report.resolvedByUserId
        self.createdUnixMs = report.createdUnixMs
        self.resolvedUnixMs = report.resolvedUnixMs
    }
}
