import KindredPostgres

extension ProfileService {
    /// Re-announces the next batch of the oldest pending community job (``CommunityResnapshotStore``); returns
    /// how many members it announced (0: no job, or the job just finished).
    func resnapshotNextBatch(limit: Int = CommunityResnapshotStore.batchSize) async throws -> Int {
        try await self.database.withTransaction { transaction in
            guard let (community, after) = try await CommunityResnapshotStore.nextJob(in: transaction) else { return 0 }
            let members = try await CommunityResnapshotStore.members(
                of: community, after: after, limit: limit, in: transaction)
            let settings = try await self.settings(of: community, in: transaction)
            for member in members {
                try await CommunityResnapshotStore.bumpVersions(of: member, in: transaction)
                let record = try await self.reread(member, in: transaction)
                try await self.appendProfileUpdated(record, settings: settings, changed: ["community"], in: transaction)
            }
            if members.count < limit {
                try await CommunityResnapshotStore.finish(community, in: transaction)
            } else {
                try await CommunityResnapshotStore.advance(community, to: members.last!, in: transaction)
            }
            return members.count
        }
    }
}
