import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit

extension MatchService {
    /// `Block`: symmetric and immediate; ends any match (MatchEnded) and announces the block (UserBlocked).
    /// NOT_FOUND only for someone who is not a member of the caller's community; blocking someone who blocked
    /// the caller answers exactly as any other block (nothing tells either side who blocked whom).
    ///
    /// "Immediate" holds everywhere, not only here: the call returns once every consumer of the caller's events
    /// (discovery's decks and search, profile's cards, chat's threads and streams) has applied them
    /// (``awaitConsumers(of:)``), so no list shows the pair and chat refuses the thread from that moment.
    func block(_ request: MatchApi.BlockRequest, _ context: ServerContext) async throws -> MatchApi.BlockResponse {
        let user = try await self.access.requireUser(context)
        let target = try Self.userID(request.targetUserId, field: "target_user_id")
        guard target != user.id else { throw MatchError.invalid("target_user_id", "SELF", "you cannot block yourself") }
        var response = MatchApi.BlockResponse()
        response.endedMatchId = try await self.database.withTransaction { transaction in
            try await self.blockInTransaction(user: user, target: target, in: transaction) ?? ""
        }
        try await self.awaitConsumers(of: user.id)
        return response
    }

    /// Returns once every consumer has applied the events of `user`'s partition committed so far (a retried
    /// Block or Unblock that changed nothing waits for the first one's events, which are the same). UNAVAILABLE
    /// (retry: the change is recorded, and retrying it is idempotent) when a consumer is still behind after
    /// `blockPropagationTimeout`.
    func awaitConsumers(of user: String) async throws {
        guard
            try await self.outbox.awaitDelivery(
                partition: user, consumers: self.configuration.events.consumers.map(\.name), on: self.database,
                timeout: self.configuration.blockPropagationTimeout)
        else {
            self.logger.warning("block not yet applied by every consumer", metadata: ["partition.kind": "user"])
            throw MatchError(
                .unavailable, "The change is recorded but not yet in effect everywhere; retry", retryAfter: .seconds(1))
        }
    }

    /// The block's effects in a transaction (Block and ReportUser with also_block); returns the ended match id.
    func blockInTransaction(user: SignedInUser, target: String, in transaction: PostgresTransaction) async throws
        -> String?
    {
        // The pair's lock: a like being committed for this pair now cannot create a match after the block.
        try await self.swipes.lockPair(user.id, target, in: transaction)
        try await self.require(.block, on: target, by: user, in: transaction)
        guard try await self.safety.block(blocker: user.id, blocked: target, in: transaction) else { return nil }
        var event = CommonApi.Event()
        event.userId = user.id
        event.communityId = user.community
        event.payload = .userBlocked(.with { $0.blockedUserId = target })
        try await self.outbox.append(event, in: transaction)
        guard let match = try await self.matches.lockActive(user.id, target, in: transaction) else { return nil }
        try await self.endMatch(
            match.record.id, users: [user.id, target], by: user.id, reason: .blocked, community: user.community,
            in: transaction)
        return match.record.id
    }

    /// Refuses `action` on `target` as on an unknown user unless the policy allows it (``VisibilityPolicy``:
    /// report and block need only a member of the caller's community, eligible or not, active or not, whatever
    /// lies between them, so neither answer tells a block, a deactivation or an unmatch apart).
    func require(_ action: MemberAction, on target: String, by user: SignedInUser, in transaction: PostgresTransaction)
        async throws
    {
        let community = try await self.directory.community(of: target, in: transaction)
        let relation = MemberRelation(
            MemberRelation.Facts(exists: community != nil, sameCommunity: community == user.community))
        guard VisibilityPolicy.allows(action, relation) else { throw MatchError.userNotFound }
    }

    /// `Unblock`: lifts the caller's own block (UserUnblocked); does not restore an ended match. Idempotent.
    func unblock(_ request: MatchApi.UnblockRequest, _ context: ServerContext) async throws -> MatchApi.UnblockResponse {
        let user = try await self.access.requireUser(context)
        let target = try Self.userID(request.targetUserId, field: "target_user_id")
        try await self.database.withTransaction { transaction in
            guard try await self.safety.unblock(blocker: user.id, blocked: target, in: transaction) else { return }
            var event = CommonApi.Event()
            event.userId = user.id
            event.communityId = user.community
            event.payload = .userUnblocked(.with { $0.unblockedUserId = target })
            try await self.outbox.append(event, in: transaction)
        }
        try await self.awaitConsumers(of: user.id)
        return MatchApi.UnblockResponse()
    }

    /// `ListBlocks`: the blocks the caller made, newest first.
    func listBlocks(_ request: MatchApi.ListBlocksRequest, _ context: ServerContext) async throws
        -> MatchApi.ListBlocksResponse
    {
        let user = try await self.access.requireUser(context)
        let size = try Self.pageSize(request.pageSize)
        let scope = "blocks|\(user.id)|\(size)"
        let offset = try PageToken.offset(of: request.pageToken, key: self.pageTokenKey, scope: scope)
        let rows = try await self.safety.blocks(of: user.id, limit: size + 1, offset: offset, on: self.database)
        var response = MatchApi.ListBlocksResponse()
        response.blocks = rows.prefix(size).map { row in
            var blocked = MatchApi.BlockedUser()
            blocked.userId = row.0
            blocked.blockedUnixMs = row.1
            return blocked
        }
        response.nextPageToken = self.nextPageToken(
            offset: offset, count: rows.count, pageSize: size, more: rows.count > size, scope: scope)
        return response
    }

    /// `ReportUser`: files a report for the admins (optionally blocking too). Rate limited; idempotent per key.
    func reportUser(_ request: MatchApi.ReportUserRequest, _ context: ServerContext) async throws
        -> MatchApi.ReportUserResponse
    {
        let user = try await self.access.requireUser(context)
        let target = try Self.userID(request.targetUserId, field: "target_user_id")
        guard target != user.id else { throw MatchError.invalid("target_user_id", "SELF", "you cannot report yourself") }
        switch request.reason {
        case .unspecified, .unrecognized: throw MatchError.invalid("reason", "REQUIRED", "a ReportReason")
        default: break
        }
        let details = try TextRule.reportDetails.validate(request.details, field: "details", as: MatchError.init)
        if request.reason == .other, details.isEmpty {
            throw MatchError.invalid("details", "REQUIRED", "explain the reason OTHER")
        }
        // Ids are ASCII: bytes, not characters, bound what the admins' report list carries.
        guard request.messageIds.count <= 20, request.messageIds.allSatisfy({ (1...64).contains($0.utf8.count) }) else {
            throw MatchError.invalid("message_ids", "TOO_MANY", "at most 20 message ids")
        }
        guard request.photoIds.count <= 9, request.photoIds.allSatisfy({ (1...64).contains($0.utf8.count) }) else {
            throw MatchError.invalid("photo_ids", "TOO_MANY", "at most 9 photo ids")
        }
        let key = request.idempotencyKey
        guard key.isEmpty || Self.isIdempotencyKey(key) else {
            throw MatchError.invalid("idempotency_key", "INVALID_FORMAT", "1..64 characters of [A-Za-z0-9_-]")
        }
        if let wait = self.reportLimiter.acquire(user.id) {
            throw MatchError(.rateLimited, "Too many reports; try again later", retryAfter: wait)
        }
        let report = ReportRow(
            id: try UUIDv7.generate(), reporter: user.id, reported: target, community: user.community,
            reason: request.reason.rawValue, details: details, messageIDs: request.messageIds,
            photoIDs: request.photoIds, status: 1, resolution: 0, note: "", resolvedBy: nil, createdUnixMs: 0,
            resolvedUnixMs: nil)
        let response = try await self.database.withTransaction { transaction in
            try await self.require(.report, on: target, by: user, in: transaction)
            let (stored, _) = try await self.safety.file(report, key: key.isEmpty ? report.id : key, in: transaction)
            guard stored.reported == target, stored.reason == report.reason, stored.details == report.details else {
                throw MatchError.invalid("idempotency_key", "IDEMPOTENCY_KEY_REUSED", "a new key for a new report")
            }
            var response = MatchApi.ReportUserResponse()
            response.reportId = stored.id
            if request.alsoBlock {
                _ = try await self.blockInTransaction(user: user, target: target, in: transaction)
                response.blocked = true
            }
            return response
        }
        if response.blocked { try await self.awaitConsumers(of: user.id) }
        return response
    }

    static func isIdempotencyKey(_ key: String) -> Bool {
        (1...64).contains(key.utf8.count)
            && key.utf8.allSatisfy { $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }

    /// `ListReports` (admin): open reports oldest first, then resolved ones newest first.
    func listReports(_ request: MatchApi.ListReportsRequest, _ context: ServerContext) async throws
        -> MatchApi.ListReportsResponse
    {
        let admin = try await self.access.requireAdmin(context)
        let size = try Self.pageSize(request.pageSize)
        let reported = try request.reportedUserId.isEmpty
            ? nil : Self.userID(request.reportedUserId, field: "reported_user_id")
        let community = request.communityId.isEmpty ? nil : request.communityId
        let scope = "reports|\(admin.id)|\(request.status.rawValue)|\(reported ?? "")|\(community ?? "")|\(size)"
        let offset = try PageToken.offset(of: request.pageToken, key: self.pageTokenKey, scope: scope)
        let rows = try await self.safety.list(
            status: request.status.rawValue, reported: reported, community: community, limit: size + 1, offset: offset,
            on: self.database)
        var response = MatchApi.ListReportsResponse()
        response.reports = rows.prefix(size).map(Self.reportMessage)
        response.nextPageToken = self.nextPageToken(
            offset: offset, count: rows.count, pageSize: size, more: rows.count > size, scope: scope)
        return response
    }

    /// `GetReport` (admin): one report as it stands (GetReportEvidence in the gateway starts here).
    func getReport(_ request: MatchApi.GetReportRequest, _ context: ServerContext) async throws
        -> MatchApi.GetReportResponse
    {
        _ = try await self.access.requireAdmin(context)
        let reportID = request.reportId.lowercased()
        guard UUIDv7.isValid(reportID) else { throw MatchError.invalid("report_id", "INVALID_FORMAT", "a report id") }
        guard let row = try await self.safety.report(id: reportID, on: self.database) else {
            throw MatchError(.notFound, "No such report")
        }
        return .with { $0.report = Self.reportMessage(row) }
    }

    /// `ResolveReport` (admin): records the decision. ACCOUNT_DEACTIVATED also deactivates the reported account
    /// through auth's DeactivateAccount, called with the admin's own access token (auth checks the admin role
    /// again and records who did it); the report is resolved only once auth agreed.
    func resolveReport(_ request: MatchApi.ResolveReportRequest, _ context: ServerContext) async throws
        -> MatchApi.ResolveReportResponse
    {
        let admin = try await self.access.requireAdmin(context)
        let reportID = request.reportId.lowercased()
        guard UUIDv7.isValid(reportID) else { throw MatchError.invalid("report_id", "INVALID_FORMAT", "a report id") }
        switch request.resolution {
        case .unspecified, .unrecognized: throw MatchError.invalid("resolution", "REQUIRED", "a ReportResolution")
        default: break
        }
        let note = try TextRule.resolutionNote.validate(request.note, field: "note", as: MatchError.init)
        let resolution = request.resolution.rawValue
        // Read first (no lock held while auth is called), then resolve under the row's lock.
        let current = try await self.database.withTransaction { transaction in
            try await self.safety.lock(reportID: reportID, in: transaction)
        }
        guard let current else { throw MatchError(.notFound, "No such report") }
        if current.status == 2 {
            guard current.resolution == resolution else {
                throw MatchError(.failedPrecondition, "The report was already resolved differently")
            }
            return .with { $0.report = Self.reportMessage(current) }
        }
        if request.resolution == .accountDeactivated {
            try await self.deactivateThroughAuth(
                current.reported, note: note, reportID: reportID,
                authorization: context.metadata["authorization"] ?? "")
        }
        let resolved = try await self.database.withTransaction { transaction -> ReportRow in
            guard let row = try await self.safety.lock(reportID: reportID, in: transaction) else {
                throw MatchError(.notFound, "No such report")
            }
            if row.status == 2 {
                guard row.resolution == resolution else {
                    throw MatchError(.failedPrecondition, "The report was already resolved differently")
                }
                return row
            }
            let resolved = try await self.safety.resolve(
                reportID: reportID, resolution: resolution, note: note, by: admin.id, in: transaction)
            // The reporter learns that the report was reviewed (notify), nothing of the decision or the member.
            var event = Kindred.Common.V1.Event()
            event.userId = resolved.reporter
            event.communityId = resolved.community
            event.payload = .reportResolved(.with { $0.reportId = reportID })
            try await self.outbox.append(event, in: transaction)
            return resolved
        }
        return .with { $0.report = Self.reportMessage(resolved) }
    }

    /// `authorization`: the admin's own header, so auth checks the admin itself.
    private func deactivateThroughAuth(_ user: String, note: String, reportID: String, authorization: String)
        async throws
    {
        guard let auth = self.auth.client else {
            throw MatchError(.unavailable, "Account deactivation is not available", retryAfter: .seconds(5))
        }
        var deactivate = Kindred.Auth.V1.DeactivateAccountRequest()
        deactivate.userId = user
        deactivate.note = TextRule.adminNote.truncating(note.isEmpty ? "report \(reportID)" : note)
        do {
            _ = try await auth.unary(
                Kindred.Auth.V1.AuthService.Method.deactivateAccount, deactivate,
                metadata: ["authorization": .string(authorization)],
                options: CallOptions(timeout: .seconds(5)))
        } catch let error as RPCError where error.code == .notFound {
            // The account is gone already (deleted): nothing left to deactivate.
        } catch let error as RPCError {
            self.logger.warning("auth refused the deactivation", metadata: ["rpc.code": "\(error.code)"])
            throw MatchError(.unavailable, "Account deactivation failed; try again", retryAfter: .seconds(1))
        }
    }

    static func reportMessage(_ row: ReportRow) -> MatchApi.Report {
        var report = MatchApi.Report()
        report.reportId = row.id
        report.reporterUserId = row.reporter
        report.reportedUserId = row.reported
        report.communityId = row.community
        report.reason = CommonApi.ReportReason(rawValue: row.reason)
        report.details = row.details
        report.messageIds = row.messageIDs
        report.photoIds = row.photoIDs
        report.status = MatchApi.ReportStatus(rawValue: row.status)
        report.resolution = MatchApi.ReportResolution(rawValue: row.resolution)
        report.resolutionNote = row.note
        report.resolvedByUserId = row.resolvedBy ?? ""
        report.createdUnixMs = row.createdUnixMs
        report.resolvedUnixMs = row.resolvedUnixMs ?? 0
        return report
    }
}

extension UInt8 {
    fileprivate var isASCIIAlphanumeric: Bool {
        (48...57).contains(self) || (65...90).contains(self) || (97...122).contains(self)
    }
}
