import Foundation
import KindredGRPC
import KindredProto

/// Report moderation across services: match holds the report, chat the messages it names, profile the reported
/// member's profile and photos. The gateway reads them with the admin's own token, so each service checks the
/// admin role again.
extension Gateway {
    /// `AdminService.GetReportEvidence`: the report, the messages it names that still exist and that the reporter
    /// could have seen (only the thread between reporter and reported member: a reporter cannot make an admin
    /// read the reported member's conversations with others), and the reported member's profile (unset when
    /// profile does not answer: the report and messages are worth reading without it).
    func reportEvidence(_ request: Api.GetReportEvidenceRequest, _ caller: Caller) async throws
        -> Api.GetReportEvidenceResponse
    {
        let report = try await self.report(request.reportId, caller)
        async let messages = self.evidenceMessages(report, caller)
        async let profile = self.reportedProfile(report.reportedUserId, caller)
        var answer = Api.GetReportEvidenceResponse()
        answer.report = Api.ModerationReport(report)
        answer.messages = try await messages
        answer.reportedProfile = await profile
        return answer
    }

    /// One report from match (NOT_FOUND and INVALID_ARGUMENT pass through).
    func report(_ reportID: String, _ caller: Caller) async throws -> MatchApi.Report {
        let response = try await self.requireMatch().call(
            MatchApi.MatchService.Method.getReport, .with { $0.reportId = reportID }, as: caller)
        guard let report = response.report else {
            throw GatewayErrors.make(.internalError, "The report could not be read", reason: "INTERNAL")
        }
        return report
    }

    /// The report's messages between the two members, in the report's order. Ids that are not message ids
    /// (match stores what the reporter sent, up to 20 strings) cannot name a message and are left out.
    private func evidenceMessages(_ report: MatchApi.Report, _ caller: Caller) async throws -> [Api.ChatMessage] {
        let ids = report.messageIds.filter { UUID(uuidString: $0) != nil }
        guard !ids.isEmpty, let chat = self.chat else { return [] }
        var forwarded = ChatApi.GetMessagesRequest()
        forwarded.messageIds = ids
        forwarded.betweenUserIds = [report.reporterUserId, report.reportedUserId]
        let response = try await chat.call(ChatApi.ChatService.Method.getMessages, forwarded, as: caller)
        return response.messages.map(Api.ChatMessage.init)
    }

    /// The reported member's full profile as an admin sees it (also when paused); nil when profile is not
    /// deployed, has no profile for them, or fails (logged).
    private func reportedProfile(_ userID: String, _ caller: Caller) async -> Api.MyProfile? {
        guard let profile = self.profile else { return nil }
        do {
            let response = try await profile.call(
                ProfileApi.ProfileService.Method.getProfile, .with { $0.userId = userID }, as: caller)
            return response.profile.map(Api.MyProfile.init)
        } catch {
            if error.code != .notFound {
                self.logger.warning("report evidence without the profile", metadata: ["error": "\(error)"])
            }
            return nil
        }
    }

    /// Removes the reported member's photos named by a CONTENT_REMOVED resolution, before match records it (a
    /// failure leaves the report open; a retry removes what is left). Only photos that are the reported member's
    /// are touched: an id that is not among their photos (already removed by an earlier attempt, or someone
    /// else's) is left alone.
    func removeReportedPhotos(_ request: Api.ResolveReportRequest, _ caller: Caller) async throws {
        guard request.resolution == .contentRemoved else {
            throw GatewayErrors.make(
                .invalidArgument, "remove_photo_ids goes with the CONTENT_REMOVED resolution only",
                reason: "INVALID_ARGUMENT")
        }
        guard request.removePhotoIds.count <= 9, request.removePhotoIds.allSatisfy({ UUID(uuidString: $0) != nil })
        else {
            throw GatewayErrors.make(
                .invalidArgument, "remove_photo_ids: at most 9 photo ids", reason: "INVALID_ARGUMENT")
        }
        let report = try await self.report(request.reportId, caller)
        if report.status == .resolved && report.resolution != .contentRemoved {
            throw GatewayErrors.make(
                .failedPrecondition, "The report was already resolved differently", reason: "FAILED_PRECONDITION")
        }
        let profile = try self.profileService()
        var owned: Set<String> = []
        do {
            let response = try await profile.call(
                ProfileApi.ProfileService.Method.getProfile, .with { $0.userId = report.reportedUserId }, as: caller)
            owned = Set(response.profile?.photos.map { $0.photoId.lowercased() } ?? [])
        } catch {
            guard error.code == .notFound else { throw error }
        }
        for photoID in request.removePhotoIds where owned.contains(photoID.lowercased()) {
            _ = try await profile.call(
                ProfileApi.ProfileService.Method.deletePhoto, .with { $0.photoId = photoID }, as: caller)
        }
    }
}
