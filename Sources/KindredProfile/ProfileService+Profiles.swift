import KindredGRPC
import KindredIdentity
import KindredPostgres
import KindredProto
import KindredServiceKit

extension ProfileService {
    /// CreateProfile: the user, in the community of their token. Idempotent with `idempotency_key`.
    func createProfile(_ request: V1.CreateProfileRequest, _ context: ServerContext) async throws
        -> V1.CreateProfileResponse
    {
        let caller = try await self.access.requireUser(context)
        let key = request.idempotencyKey.isEmpty ? nil : request.idempotencyKey
        if let key, !Self.isValidIdempotencyKey(key) {
            throw ProfileError.invalid("idempotency_key", "INVALID_FORMAT", "1..64 characters of [A-Za-z0-9_-]")
        }
        let settings = try await self.settings(of: caller.community)
        // A first profile makes a member: not in a closed community (a retry of one that exists answers below).
        if !settings.signUpOpen, try await self.record(caller.id) == nil { throw ProfileError.signUpClosed }
        let input = request.fields ?? .init()
        var fields = try ProfileRules.validated(input, settings: settings)
        fields.attributes = fields.attributes.sorted { $0.key < $1.key }
        try ProfileRules.checkAge(input.birthDate ?? .init(), settings: settings, today: ProfileRules.today())
        let record = try await self.database.withTransaction { transaction in
            let inserted = try await self.profiles.insert(
                userID: caller.id, communityID: caller.community, fields: fields, idempotencyKey: key,
                in: transaction)
            let record = try await self.reread(caller.id, in: transaction)
            guard inserted else {
                guard let key, record.idempotencyKey == key else {
                    throw ProfileError(.alreadyExists, "ALREADY_EXISTS", "A profile exists for this account")
                }
                return record
            }
            try await self.appendProfileUpdated(record, settings: settings, changed: ["created"], in: transaction)
            return record
        }
        try await self.awaitReaders(of: caller.id)
        return .with { $0.profile = ProfileViews.owner(record, settings: settings, today: ProfileRules.today(), media: self.media) }
    }

    /// GetProfile: the owner's view. The user for their own; admins and services for any; another user's id is
    /// PERMISSION_DENIED.
    func getProfile(_ request: V1.GetProfileRequest, _ context: ServerContext) async throws -> V1.GetProfileResponse {
        let caller = try await self.access.authenticate(context)
        let target = request.userId.isEmpty ? (caller.userID ?? "") : request.userId
        guard !target.isEmpty else { throw ProfileError.invalid("user_id", "REQUIRED", "services name the user") }
        guard caller.userID == target || caller.isAdmin || caller.isService else { throw ProfileError.permissionDenied }
        let page = try await self.pages.read([target], in: self.database)
        guard let record = page.records[target] else { throw ProfileError.profileNotFound }
        let settings = try await self.settings(of: record.communityID, from: page)
        return .with { $0.profile = ProfileViews.owner(record, settings: settings, today: ProfileRules.today(), media: self.media) }
    }

    /// GetProfiles: cards as the viewer sees them. Users are their own viewer; services name one. Invisible and
    /// unknown ids come back as missing, indistinguishably. The members the policy would show only within the
    /// viewer's preferences (not matched, not the viewer) are checked with discovery in one call (the kit's
    /// ``CandidateCheck`` in card mode), unless the gateway vouches for the page (`source`: its ids are the viewer's deck, search or likes received).
    func getProfiles(_ request: V1.GetProfilesRequest, _ context: ServerContext) async throws -> V1.GetProfilesResponse {
        let caller = try await self.access.authenticate(context)
        let viewer: String
        var viewerCommunity: String?
        if let userID = caller.userID {
            guard request.viewerUserId.isEmpty || request.viewerUserId == userID else { throw ProfileError.permissionDenied }
            viewer = userID
            viewerCommunity = caller.claims.cid
        } else {
            guard caller.isService, !request.viewerUserId.isEmpty else {
                throw ProfileError.invalid("viewer_user_id", "REQUIRED", "services name the viewer")
            }
            viewer = request.viewerUserId
        }
        // 50 cards at the text and photo caps stay under the 4 MiB message limit (`CardPage`).
        guard (1...CardPage.maxCards).contains(request.userIds.count), Set(request.userIds).count == request.userIds.count
        else {
            throw ProfileError.invalid("user_ids", "OUT_OF_RANGE", "1..50 distinct ids")
        }
        // Profiles, photos, their communities' settings and the viewer's relations to them.
        let page = try await self.cardPage(request.userIds, viewer: viewer)
        let records = page.records
        let viewerRecord = records[viewer]
        viewerCommunity = viewerCommunity ?? viewerRecord?.communityID
        let relations = page.relations
        var settingsCache = page.settings
        var found: [(record: ProfileRecord, settings: Kindred.Common.V1.CommunitySettings)?] = []
        for id in request.userIds {
            guard let record = records[id], viewerCommunity != nil else {
                found.append(nil)
                continue
            }
            if settingsCache[record.communityID] == nil {
                settingsCache[record.communityID] = try await self.settings(of: record.communityID)
            }
            found.append((record, settingsCache[record.communityID]!))
        }
        // Preferences: discovery's one predicate (or the viewer's likes received), asked once for the page.
        var outside: Set<String> = []
        if let community = viewerCommunity, !Self.vouchedFor(request.source, caller) {
            let unchecked = found.compactMap { entry -> String? in
                guard let entry,
                    ProfileViews.needsCardCheck(
                        entry.record, settings: entry.settings, viewer: viewer, viewerCommunity: community,
                        relations: relations)
                else { return nil }
                return entry.record.userID
            }
            if !unchecked.isEmpty {
                let shown = try await self.cardCheck.shown(unchecked, to: viewer)
                outside = Set(unchecked.filter { !shown.contains($0.lowercased()) })
            }
        }
        let today = ProfileRules.today()
        var response = V1.GetProfilesResponse()
        let location = self.configuration.location
        let viewerPoint = location.point(userID: viewer, cell: viewerRecord?.locationCell)
        for (id, entry) in zip(request.userIds, found) {
            guard let entry, let community = viewerCommunity,
                ProfileViews.isVisible(
                    entry.record, settings: entry.settings, viewer: viewer, viewerCommunity: community,
                    relations: relations, withinPreferences: !outside.contains(id))
            else {
                response.missingUserIds.append(id)
                continue
            }
            response.profiles.append(
                ProfileViews.card(
                    entry.record, settings: entry.settings, viewer: viewerPoint, location: location, today: today,
                    media: self.media))
        }
        return response
    }

    /// The reads behind a page of cards. Without a standby (or with one too far behind): one round trip to the
    /// primary. With one: the viewer's own record and their relations to the others (blocks, matches, ended
    /// pairs) from the primary, so whatever the viewer did shows at once (read-your-writes); the other members'
    /// profiles, photos and communities from the standby, at most its measured lag old (as if the page had been
    /// read that long ago). A failed standby read is repeated on the primary.
    func cardPage(_ ids: [String], viewer: String) async throws -> ProfilePageStore.Page {
        guard let standby = self.standby, let replica = standby.client() else {
            return try await self.pages.read(ids + [viewer], relationsOf: viewer, to: ids, in: self.database)
        }
        let others = ids.filter { $0 != viewer }
        async let own = self.pages.read([viewer], relationsOf: viewer, to: ids, in: self.database)
        var page: ProfilePageStore.Page
        do {
            page = try await self.pages.read(others, in: replica)
        } catch {
            standby.failedOver(error)
            page = try await self.pages.read(others, in: self.database)
        }
        let mine = try await own
        page.records.merge(mine.records) { _, primary in primary }
        page.settings.merge(mine.settings) { _, primary in primary }
        page.relations = mine.relations
        return page
    }

    /// Whether the page's ids are vouched for as within the viewer's preferences: the gateway (its service token,
    /// naming the viewer) says they are the answer of the viewer's deck, top picks or search (discovery's
    /// predicate) or of their likes received (they liked the viewer). From any other caller `source` is ignored.
    static func vouchedFor(_ source: V1.CardSource, _ caller: CallerIdentity) -> Bool {
        (source == .deck || source == .likesReceived) && caller.isService && caller.serviceName == "gateway"
    }

    /// UpdateProfile: the user for their own profile; admins for any (the only ones who may change birth_date).
    func updateProfile(_ request: V1.UpdateProfileRequest, _ context: ServerContext) async throws
        -> V1.UpdateProfileResponse
    {
        let caller = try await self.access.authenticate(context)
        guard let callerID = caller.userID else { throw ProfileError.permissionDenied }
        let target = request.userId.isEmpty ? callerID : request.userId
        guard target == callerID || caller.isAdmin else { throw ProfileError.permissionDenied }
        let (record, settings) = try await self.database.withTransaction {
            transaction -> (ProfileRecord, Kindred.Common.V1.CommunitySettings) in
            guard let current = try await self.lockedRecord(target, in: transaction) else {
                throw ProfileError.profileNotFound
            }
            if request.expectedVersion != 0, request.expectedVersion != current.version {
                throw ProfileError.versionMismatch
            }
            let settings = try await self.settings(of: current.communityID, in: transaction)
            let (merged, changed) = try ProfileRules.merge(
                paths: request.updatePaths, input: request.fields ?? .init(), into: current.fields,
                admin: caller.isAdmin)
            var fields = try ProfileRules.validated(
                ProfileRules.keepingDefined(merged, settings: settings), settings: settings)
            fields.attributes = fields.attributes.sorted { $0.key < $1.key }
            if changed.contains("birth_date") {
                try ProfileRules.checkAge(fields.birthDate ?? .init(), settings: settings, today: ProfileRules.today())
            }
            guard !changed.isEmpty || fields != current.fields else { return (current, settings) }
            try await self.profiles.update(userID: target, fields: fields, in: transaction)
            let record = try await self.reread(target, in: transaction)
            let before = ProfileViews.eligibility(current, settings: settings)
            let after = ProfileViews.eligibility(record, settings: settings)
            try await self.appendProfileUpdated(
                record, settings: settings, changed: changed + (before.eligible != after.eligible ? ["eligible"] : []),
                in: transaction)
            return (record, settings)
        }
        try await self.awaitReaders(of: target)
        var full = record
        full.photos = try await self.photos.photos(of: [target], in: self.database)[target] ?? []
        return .with { $0.profile = ProfileViews.owner(full, settings: settings, today: ProfileRules.today(), media: self.media) }
    }

    /// ListProfileIndexEntries: service tokens only (discovery's backfill).
    func listProfileIndexEntries(_ request: V1.ListProfileIndexEntriesRequest, _ context: ServerContext) async throws
        -> V1.ListProfileIndexEntriesResponse
    {
        try await self.access.requireService(["discovery", "match"], context)
        guard (0...1000).contains(request.pageSize) else {
            throw ProfileError.invalid("page_size", "OUT_OF_RANGE", "1..1000, or 0 for 500")
        }
        let size = request.pageSize == 0 ? 500 : Int(request.pageSize)
        let scope = "index:\(request.communityId):\(request.includeIneligible)"
        let offset = try PageToken.offset(of: request.pageToken, key: self.pageTokenKey, scope: scope)
        // Pages by position in user-id order; ineligible profiles are filtered after reading.
        let rows = try await self.database.query(
            """
            SELECT user_id FROM profiles WHERE (\(request.communityId.isEmpty ? nil : request.communityId)::text IS NULL
                OR community_id = \(request.communityId)) ORDER BY user_id OFFSET \(Int64(offset)) LIMIT \(Int64(size + 1))
            """)
        let ids = try rows.map { try $0.decode(String.self, at: 0) }
        let records = try await self.records(Array(ids.prefix(size)))
        var settingsCache: [String: Kindred.Common.V1.CommunitySettings] = [:]
        var response = V1.ListProfileIndexEntriesResponse()
        // Cut by bytes as well as by count: snapshots carry attributes (up to the fields' 16 KiB each), so 500 of
        // them could pass the 4 MiB message limit. `read` counts the ids this page has dealt with.
        var (read, bytes) = (0, 0)
        for id in ids.prefix(size) {
            if let record = records[id] {
                if settingsCache[record.communityID] == nil {
                    settingsCache[record.communityID] = try await self.settings(of: record.communityID)
                }
                let snapshot = ProfileViews.snapshot(record, settings: settingsCache[record.communityID]!)
                if snapshot.eligible || request.includeIneligible {
                    let entryBytes = ((try? snapshot.serializedBytes().count) ?? 0) + 8
                    if bytes + entryBytes > CardPage.maxPageBytes, !response.entries.isEmpty { break }
                    bytes += entryBytes
                    response.entries.append(snapshot)
                }
            }
            read += 1
        }
        if ids.count > size || read < min(ids.count, size) {
            response.nextPageToken = PageToken.encode(offset: offset + read, key: self.pageTokenKey, scope: scope)
        }
        return response
    }

    /// GetUserFootprint: admins and services. Rows per kind, plus "photo_files": blobs of the user's photos present
    /// in the photo store.
    func getUserFootprint(_ request: Kindred.Common.V1.GetUserFootprintRequest, _ context: ServerContext) async throws
        -> Kindred.Common.V1.GetUserFootprintResponse
    {
        try await self.access.requireAdminOrService(context)
        guard !request.userId.isEmpty else { throw ProfileError.invalid("user_id", "REQUIRED", "the user") }
        var counts = try await self.profiles.footprint(request.userId, in: self.database)
        let keys = try await PhotoStore.blobKeys(of: request.userId, in: self.database)
        counts.append(("photo_files", Int64(try await self.blobs.count(keys: keys))))
        return .init(counts: counts)
    }
}
