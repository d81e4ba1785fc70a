import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import Logging

/// `kindred.profile.v1.CommunityService`: communities and their configuration. Reads are open (apps render forms
/// before sign-up); writes need ROLE_ADMIN; ListCommunities needs an admin or a service. Every write emits
/// CommunityUpdated through the outbox in its transaction.
public final class CommunityService: GRPCService, Sendable {
    typealias V1 = Kindred.Profile.V1
    let database: PostgresClient
    /// Who is calling and what they may do (the kit's one caller check).
    let access: ServiceAccess
    let communities = CommunityStore()
    let pageTokenKey: [UInt8]
    static let outbox = Outbox(producer: "profile")

    init(database: PostgresClient, access: ServiceAccess, pageTokenKey: [UInt8]) {
        self.database = database
        self.access = access
        self.pageTokenKey = pageTokenKey
    }

    public func register(in router: inout GRPCRouter) {
        typealias M = V1.CommunityService.Method
        router.unary(M.getCommunity) { try await self.getCommunity($0, $1) }
        router.unary(M.listCommunities) { try await self.listCommunities($0, $1) }
        router.unary(M.createCommunity) { try await self.createCommunity($0, $1) }
        router.unary(M.updateCommunity) { try await self.updateCommunity($0, $1) }
    }

    /// Creates the communities that do not exist yet (each with its CommunityUpdated event); returns their ids.
    /// The presets command and the demo mode use it.
    public static func install(_ presets: [Kindred.Common.V1.Community], database: PostgresClient) async throws -> [String] {
        var created: [String] = []
        for preset in presets {
            let violations = CommunityRules.violations(preset.settings ?? .init())
            guard violations.isEmpty, CommunityRules.isValidID(preset.communityId) else {
                throw ProfileError.invalid(violations)
            }
            let inserted = try await database.withTransaction { transaction in
                guard let community = try await CommunityStore().insert(preset, in: transaction) else { return false }
                try await Self.appendUpdated(community, in: transaction)
                return true
            }
            if inserted { created.append(preset.communityId) }
        }
        return created
    }

    static func appendUpdated(_ community: Kindred.Common.V1.Community, in transaction: PostgresTransaction) async throws {
        var event = Kindred.Common.V1.Event()
        event.communityId = community.communityId
        event.payload = .communityUpdated(.with { $0.community = community })
        try await Self.outbox.append(event, in: transaction)
    }

    func getCommunity(_ request: V1.GetCommunityRequest, _ context: ServerContext) async throws -> V1.GetCommunityResponse {
        var id = request.communityId
        if id.isEmpty {
            let caller = try await self.access.authenticate(context)
            guard let community = caller.claims.cid, !community.isEmpty else {
                throw ProfileError.invalid("community_id", "REQUIRED", "a community id, or a user token")
            }
            id = community
        }
        guard CommunityRules.isValidID(id), let community = try await self.communities.find(id, in: self.database) else {
            throw ProfileError.communityNotFound
        }
        return .with { $0.community = community }
    }

    func listCommunities(_ request: V1.ListCommunitiesRequest, _ context: ServerContext) async throws
        -> V1.ListCommunitiesResponse
    {
        try await self.access.requireAdminOrService(context)
        guard (0...100).contains(request.pageSize) else {
            throw ProfileError.invalid("page_size", "OUT_OF_RANGE", "1..100, or 0 for 50")
        }
        let size = request.pageSize == 0 ? 50 : Int(request.pageSize)
        let offset = try PageToken.offset(of: request.pageToken, key: self.pageTokenKey, scope: "communities")
        let page = try await self.communities.list(offset: offset, limit: size + 1, in: self.database)
        var response = V1.ListCommunitiesResponse()
        response.communities = Array(page.prefix(size))
        if page.count > size {
            response.nextPageToken = PageToken.encode(offset: offset + size, key: self.pageTokenKey, scope: "communities")
        }
        return response
    }

    func createCommunity(_ request: V1.CreateCommunityRequest, _ context: ServerContext) async throws
        -> V1.CreateCommunityResponse
    {
        try await self.access.requireAdmin(context)
        var violations: [Kindred.Common.V1.FieldViolation] = []
        if !CommunityRules.isValidID(request.communityId) {
            violations.append(ProfileError.violation("community_id", "INVALID_FORMAT", "2..32 characters of [a-z0-9-]"))
        }
        if let violation = CommunityRules.displayNameViolation(request.displayName) { violations.append(violation) }
        let settings = CommunityRules.withDefaults(request.settings ?? .init())
        violations += CommunityRules.violations(settings)
        guard violations.isEmpty else { throw ProfileError.invalid(violations) }
        let community = Kindred.Common.V1.Community.with {
            $0.communityId = request.communityId
            $0.displayName = request.displayName
            $0.settings = settings
        }
        let stored = try await self.database.withTransaction { transaction in
            guard let stored = try await self.communities.insert(community, in: transaction) else {
                throw ProfileError(.alreadyExists, "ALREADY_EXISTS", "A community with this id exists")
            }
            try await Self.appendUpdated(stored, in: transaction)
            return stored
        }
        return .with { $0.community = stored }
    }

    func updateCommunity(_ request: V1.UpdateCommunityRequest, _ context: ServerContext) async throws
        -> V1.UpdateCommunityResponse
    {
        try await self.access.requireAdmin(context)
        guard CommunityRules.isValidID(request.communityId) else { throw ProfileError.communityNotFound }
        let updated = try await self.database.withTransaction { transaction in
            guard let current = try await self.communities.lock(request.communityId, in: transaction) else {
                throw ProfileError.communityNotFound
            }
            if request.expectedVersion != 0, request.expectedVersion != current.version {
                throw ProfileError.versionMismatch
            }
            let changed = try CommunityRules.applying(
                paths: request.updatePaths, displayName: request.displayName,
                settings: request.settings ?? .init(), to: current)
            let stored = try await self.communities.update(changed, in: transaction)
            try await Self.appendUpdated(stored, in: transaction)
            // Members' snapshots depend on the rules (eligibility, attributes): re-announced in the background.
            try await CommunityResnapshotStore.request(stored.communityId, in: transaction)
            return stored
        }
        return .with { $0.community = updated }
    }
}
