import CoreMetrics
import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredMediaURL
import KindredPostgres
import KindredProto
import KindredServiceKit
import Logging

/// `kindred.profile.v1.ProfileService`: profiles, location, photos, the index backfill, events from auth and match,
/// and the footprint. Every RPC checks the caller may touch the ids it names (see each handler).
public final class ProfileService: GRPCService, Sendable {
    typealias V1 = Kindred.Profile.V1
    let configuration: ProfileConfiguration
    let database: PostgresClient
    /// The standby other members' cards are read from while it is close behind (`KINDRED_PROFILE_READ_DATABASE_URL`);
    /// nil = every read on the primary. See ``cardPage(_:viewer:)``.
    let standby: StandbyReads?
    /// Who is calling and what they may do (the kit's one caller check).
    let access: ServiceAccess
    let inbox: EventInbox
    let relations: any RelationOracle
    /// Whose cards a viewer may see as far as preferences go (discovery's CheckCandidates, card mode).
    let cardCheck: any CandidateCheck
    let blobs: any PhotoBlobStorage
    let photoWorkers: PhotoWorkers
    let uploadLimiter: TokenBucketLimiter
    let locationRules: LocationRules
    let pageTokenKey: [UInt8]
    /// Signed media URLs on photos; nil when `KINDRED_MEDIA_URL_KEY` is unset.
    let media: MediaLinks?
    /// profile_propagation_wait_seconds: how long a write waited for discovery and match to apply it;
    /// profile_propagation_timeouts_total: writes answered UNAVAILABLE because one of them was still behind.
    let propagationWait: CoreMetrics.Timer
    let propagationTimeouts: Counter
    let logger: Logger
    /// The SQL, one store per aggregate.
    let profiles = ProfileStore()
    let photos = PhotoStore()
    let communities = CommunityStore()
    let pages = ProfilePageStore()
    static let outbox = CommunityService.outbox

    init(
        configuration: ProfileConfiguration,
        database: PostgresClient,
        access: ServiceAccess,
        cardCheck: any CandidateCheck,
        blobs: any PhotoBlobStorage,
        photoWorkers: PhotoWorkers,
        pageTokenKey: [UInt8],
        standby: StandbyReads? = nil,
        metricsFactory: any MetricsFactory = NOOPMetricsHandler.instance,
        logger: Logger
    ) {
        self.configuration = configuration
        self.database = database
        self.standby = standby
        self.access = access
        self.inbox = EventInbox(database: database, logger: logger)
        self.relations = RelationTables(database: database)
        self.cardCheck = cardCheck
        self.blobs = blobs
        self.photoWorkers = photoWorkers
        self.uploadLimiter = TokenBucketLimiter(
            rate: Double(configuration.uploadsPerHour) / 3600, burst: min(configuration.uploadsPerHour, 20))
        var rules = LocationRules()
        rules.minimumInterval = configuration.locationInterval
        self.locationRules = rules
        self.pageTokenKey = pageTokenKey
        let lifetime = configuration.mediaURLLifetimeSeconds
        self.media = configuration.mediaURLKey.flatMap {
            MediaURLSigner(key: Array($0.utf8), lifetimeSeconds: lifetime, stepSeconds: max(1, lifetime / 3))
        }.map {
            MediaLinks(
                signer: $0, base: configuration.mediaBaseURL,
                uploadLifetimeSeconds: configuration.uploadURLLifetimeSeconds)
        }
        self.propagationWait = CoreMetrics.Timer(label: "profile_propagation_wait_seconds", factory: metricsFactory)
        self.propagationTimeouts = Counter(label: "profile_propagation_timeouts_total", factory: metricsFactory)
        self.logger = logger
    }

    public func register(in router: inout GRPCRouter) {
        typealias M = V1.ProfileService.Method
        router.unary(M.createProfile) { try await self.createProfile($0, $1) }
        router.unary(M.getProfile) { try await self.getProfile($0, $1) }
        router.unary(M.getProfiles) { try await self.getProfiles($0, $1) }
        router.unary(M.updateProfile) { try await self.updateProfile($0, $1) }
        router.unary(M.updateLocation) { try await self.updateLocation($0, $1) }
        router.clientStreaming(M.uploadPhoto) { try await self.uploadPhoto($0, $1) }
        router.unary(M.createUploadUrl) { try await self.createUploadURL($0, $1) }
        router.unary(M.getPhoto) { try await self.getPhoto($0, $1) }
        router.unary(M.deletePhoto) { try await self.deletePhoto($0, $1) }
        router.unary(M.reorderPhotos) { try await self.reorderPhotos($0, $1) }
        router.unary(M.listProfileIndexEntries) { try await self.listProfileIndexEntries($0, $1) }
        router.unary(M.deliverEvents) { try await self.deliverEvents($0, $1) }
        router.unary(M.getUserFootprint) { try await self.getUserFootprint($0, $1) }
    }

    // MARK: Shared steps

    /// The settings of a community (NOT_FOUND for an unknown one).
    func settings(of communityID: String) async throws -> Kindred.Common.V1.CommunitySettings {
        guard let community = try await self.communities.find(communityID, in: self.database) else {
            throw ProfileError.communityNotFound
        }
        return community.settings ?? .init()
    }

    /// The settings `page` read, or (a community the page's statements did not see) read now.
    func settings(of communityID: String, from page: ProfilePageStore.Page) async throws
        -> Kindred.Common.V1.CommunitySettings
    {
        if let settings = page.settings[communityID] { return settings }
        return try await self.settings(of: communityID)
    }

    func settings(of communityID: String, in transaction: PostgresTransaction) async throws
        -> Kindred.Common.V1.CommunitySettings
    {
        guard let community = try await self.communities.find(communityID, in: transaction) else {
            throw ProfileError.communityNotFound
        }
        return community.settings ?? .init()
    }

    /// Profiles with their photos, by user id (one round trip: ``ProfilePageStore``).
    func records(_ userIDs: [String]) async throws -> [String: ProfileRecord] {
        try await self.pages.read(userIDs, in: self.database).records
    }

    func record(_ userID: String) async throws -> ProfileRecord? {
        try await self.records([userID])[userID]
    }

    /// The profile locked in `transaction`, with its photos.
    func lockedRecord(_ userID: String, in transaction: PostgresTransaction) async throws -> ProfileRecord? {
        guard var record = try await self.profiles.lock(userID, in: transaction) else { return nil }
        record.photos = try await self.photos.photos(of: userID, in: transaction)
        return record
    }

    /// Appends ProfileUpdated with a snapshot of `record` (as it is after the change).
    func appendProfileUpdated(
        _ record: ProfileRecord,
        settings: Kindred.Common.V1.CommunitySettings,
        changed: [String],
        in transaction: PostgresTransaction
    ) async throws {
        var event = Kindred.Common.V1.Event()
        event.userId = record.userID
        event.communityId = record.communityID
        event.payload = .profileUpdated(
            .with {
                $0.snapshot = ProfileViews.snapshot(record, settings: settings)
                $0.changedPaths = changed
            })
        try await Self.outbox.append(event, in: transaction)
    }

    /// The record re-read after a change in `transaction` (version and timestamps as stored).
    func reread(_ userID: String, in transaction: PostgresTransaction) async throws -> ProfileRecord {
        guard let record = try await self.lockedRecord(userID, in: transaction) else { throw ProfileError.profileNotFound }
        return record
    }

    static func isValidIdempotencyKey(_ key: String) -> Bool {
        (1...64).contains(key.utf8.count)
            && key.utf8.allSatisfy {
                ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 45 || $0 == 95
            }
    }

    static func isUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                guard byte == 45 else { return false }
            } else {
                guard (byte >= 48 && byte <= 57) || (byte >= 97 && byte <= 102) || (byte >= 65 && byte <= 70) else {
                    return false
                }
            }
        }
        return true
    }

    static func nowMilliseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}
