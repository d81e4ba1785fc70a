import KindredGRPC
import KindredIdentity
import KindredOpenSSL
import KindredPostgres
import KindredProto
import KindredServiceKit
import KindredVips

/// The renditions the pipeline makes and the contract's variants: `RenditionSpec.standard` in order is FULL
/// (1080x1350), CARD (640x800), THUMBNAIL (320x400), ICON (84x105).
enum PhotoVariants {
    static let order: [Kindred.Common.V1.PhotoVariant] = [.full, .card, .thumbnail, .icon]

    static func variant(of spec: RenditionSpec) -> Kindred.Common.V1.PhotoVariant? {
        RenditionSpec.standard.firstIndex(of: spec).map { Self.order[$0] }
    }

    /// The strong etag of one rendition: "<photo id>.<version>.<variant>[w]" (at most 64 characters).
    static func etag(photoID: String, version: Int64, variant: Int32, format: String) -> String {
        "\(photoID).\(version).\(variant)\(format == "webp" ? "w" : "")"
    }

    /// A year: a rendition never changes under its etag (a new version gets a new one).
    static let cacheMaxAgeSeconds: Int32 = 31_536_000
}

extension ProfileService {
    /// The upload cap, checked while streaming (the same as the pipeline's byte limit).
    static let maxUploadBytes = PhotoLimits.standard.maxBytes
    static let maxChunkBytes = 1 << 20
    static let acceptedContentTypes: Set<String> = ["image/jpeg", "image/png", "image/webp", "image/heic", "image/heif"]
    static let minimumPhotoSide = 320
    /// Every rendition of `RenditionSpec.standard` as JPEG and WebP at quality 80, limits 15 MiB / 40 MP.
    static let pipeline = PhotoPipeline()

    /// UploadPhoto: the user, or the gateway with a signed upload URL (a PUT on its media port: the URL names the
    /// member, position and idempotency key). Header first, then chunks; the declared size, the 15 MiB cap and the
    /// optional SHA-256 are checked while streaming, before anything is decoded. The pipeline runs on the photo
    /// workers; the renditions' bytes go to the photo store before the transaction that references them commits.
    func uploadPhoto(_ requests: RequestStream<V1.UploadPhotoRequest>, _ context: ServerContext) async throws
        -> V1.UploadPhotoResponse
    {
        let identity = try await self.access.authenticate(context)
        var iterator = requests.makeAsyncIterator()
        guard case .header(let header)? = try await iterator.next()?.part else {
            throw ProfileError.invalid("header", "REQUIRED", "the first message is the header")
        }
        let caller = try self.uploader(identity, header)
        guard Self.acceptedContentTypes.contains(header.contentType) else {
            throw ProfileError.invalid("header.content_type", "UNSUPPORTED_IMAGE", "image/jpeg, image/png, image/webp or image/heic")
        }
        guard (1...Int64(Self.maxUploadBytes)).contains(header.totalSizeBytes) else {
            throw ProfileError.invalid("header.total_size_bytes", "OUT_OF_RANGE", "1..\(Self.maxUploadBytes)")
        }
        guard header.sha256.isEmpty || header.sha256.count == 32 else {
            throw ProfileError.invalid("header.sha256", "INVALID_FORMAT", "32 bytes, or empty")
        }
        guard caller.position >= 0 else { throw ProfileError.invalid("header.position", "OUT_OF_RANGE", ">= 0") }
        let uploadKey = caller.uploadKey
        if let uploadKey, !Self.isValidIdempotencyKey(uploadKey) {
            throw ProfileError.invalid("header.idempotency_key", "INVALID_FORMAT", "1..64 characters of [A-Za-z0-9_-]")
        }
        // A retried upload key answers with the first result at once, before a byte of the body is read: a
        // replay skips the rate limit and the photo cap, so it must not cost a buffer either. What the client
        // still sends is dropped (the stream is answered early, as HTTP/2 allows).
        if let uploadKey, let retried = try await self.existingUpload(caller.id, uploadKey, sha256: header.sha256) {
            return retried
        }
        try await self.requireRoomForAPhoto(caller.id)
        if let wait = self.uploadLimiter.acquire(caller.id) {
            throw ProfileError.rateLimited("Too many photo uploads; try again later", retryAfter: wait)
        }

        var data: [UInt8] = []
        data.reserveCapacity(Int(header.totalSizeBytes))
        while let message = try await iterator.next() {
            guard case .chunk(let chunk)? = message.part, (1...Self.maxChunkBytes).contains(chunk.count) else {
                throw ProfileError.invalid("chunk", "INVALID_FORMAT", "after the header only chunks of 1..1048576 bytes")
            }
            guard data.count + chunk.count <= Int(header.totalSizeBytes) else {
                throw ProfileError(.resourceExhausted, "UPLOAD_TOO_LARGE", "More bytes than total_size_bytes declared")
            }
            data += chunk
        }
        guard data.count == Int(header.totalSizeBytes) else {
            var error = ProfileError(.invalidArgument, "SIZE_MISMATCH", "Fewer bytes arrived than total_size_bytes declared")
            error.violations = [ProfileError.violation("header.total_size_bytes", "SIZE_MISMATCH", "the exact size")]
            throw error
        }
        let contentHash = SHA256.hash(data)
        if !header.sha256.isEmpty, header.sha256 != contentHash {
            var error = ProfileError(.invalidArgument, "CHECKSUM_MISMATCH", "The SHA-256 of the bytes differs from the header's")
            error.violations = [ProfileError.violation("header.sha256", "CHECKSUM_MISMATCH", "SHA-256 of the original")]
            throw error
        }
        let upload = data
        let outcome = try await self.photoWorkers.run { () -> Result<ProcessedPhoto, PhotoRejection> in
            do throws(PhotoRejection) {
                return .success(try Self.pipeline.process(upload))
            } catch {
                return .failure(error)
            }
        }
        guard let outcome else {
            throw ProfileError.rateLimited("Photo processing is busy; try again shortly", retryAfter: .seconds(1))
        }
        let processed: ProcessedPhoto
        switch outcome {
        case .success(let photo): processed = photo
        case .failure(let rejection) where rejection.reason == PhotoRejection.Reason.processingFailed:
            // The encoder's fault, not the upload's: INTERNAL (the detail goes to the log only).
            self.logger.error("photo processing failed", metadata: ["photo.reason": "\(rejection.reason)"])
            throw ProfileError(.internalError, "INTERNAL", "The photo could not be processed")
        case .failure(let rejection):
            self.logger.info("photo refused", metadata: ["photo.reason": "\(rejection.reason)"])
            throw ProfileError(.invalidArgument, rejection.reason, "The image was refused: \(rejection.message)")
        }
        guard processed.sourceWidth >= Self.minimumPhotoSide, processed.sourceHeight >= Self.minimumPhotoSide else {
            throw ProfileError(.invalidArgument, "IMAGE_TOO_SMALL", "The image must be at least 320x320 pixels")
        }

        var photo = PhotoRecord(
            id: try UUIDv7.generate(), userID: caller.id, position: caller.position, version: 1,
            contentHash: contentHash, width: 0, height: 0, uploadKey: uploadKey, createdUnixMs: Self.nowMilliseconds())
        for rendition in processed.renditions {
            guard let variant = PhotoVariants.variant(of: rendition.spec) else { continue }
            let key = PhotoBlobKey.of(rendition.bytes)
            try await self.blobs.put(key: key, bytes: rendition.bytes)
            photo.renditions.append(
                RenditionRecord(
                    variant: variant.rawValue, format: rendition.format.rawValue, width: Int32(rendition.width),
                    height: Int32(rendition.height), byteSize: Int32(rendition.bytes.count), blobKey: key))
            if variant == .full {
                photo.width = Int32(rendition.width)
                photo.height = Int32(rendition.height)
            }
        }
        let stored = try await self.database.withTransaction { transaction -> String in
            guard let current = try await self.lockedRecord(caller.id, in: transaction) else {
                throw ProfileError.profileNotFound
            }
            if let uploadKey,
                let first = try await self.photos.photo(userID: caller.id, uploadKey: uploadKey, in: transaction)
            {
                guard first.contentHash == contentHash else { throw Self.uploadKeyReused }
                return first.id  // a concurrent retry stored it first
            }
            let settings = try await self.settings(of: current.communityID, in: transaction)
            guard current.photos.count < Int(settings.maxPhotos) else { throw Self.photoLimitReached }
            try await self.photos.insert(photo, at: Int(caller.position), in: transaction)
            try await self.profiles.touch(userID: caller.id, card: true, in: transaction)
            let record = try await self.reread(caller.id, in: transaction)
            try await self.appendProfileUpdated(record, settings: settings, changed: ["photos"], in: transaction)
            return photo.id
        }
        // A photo can complete (or, deleted, undo) the profile: the member's next deck call and swipe see it.
        try await self.awaitReaders(of: caller.id)
        return try await self.uploadResponse(caller.id, photoID: stored)
    }

    static let photoLimitReached = ProfileError(
        .failedPrecondition, "PHOTO_LIMIT_REACHED", "The profile holds the community's maximum of photos")

    static let uploadKeyReused = ProfileError(
        .alreadyExists, "UPLOAD_KEY_REUSED", "This upload id already stored a different photo")

    /// Whose photo an upload stores, where, under which idempotency key.
    struct Uploader {
        var id: String
        var position: Int32
        var uploadKey: String?
    }

    /// A member uploading with their own token, or the gateway passing on a PUT to a signed upload URL, which is
    /// checked here again (a service token alone cannot store a photo on anyone's profile).
    private func uploader(_ identity: CallerIdentity, _ header: V1.PhotoUploadHeader) throws -> Uploader {
        if header.uploadUrl.isEmpty {
            let user = try ServiceAccess.user(identity)
            return Uploader(
                id: user.id, position: header.position,
                uploadKey: header.idempotencyKey.isEmpty ? nil : header.idempotencyKey)
        }
        _ = try ServiceAccess.check(identity, allowed: ["gateway"])
        guard header.position == 0, header.idempotencyKey.isEmpty else {
            throw ProfileError.invalid("header.upload_url", "INVALID_FORMAT", "position and idempotency_key come from the URL")
        }
        guard let media = self.media,
            let (path, _) = media.signer.verifyUpload(header.uploadUrl, now: Self.nowMilliseconds() / 1000)
        else {
            throw ProfileError(.permissionDenied, "INVALID_UPLOAD_URL", "The upload URL is invalid or has expired")
        }
        return Uploader(id: path.userID, position: path.position, uploadKey: path.uploadID)
    }

    /// CreateUploadUrl: the user, with a profile that has room for a photo.
    func createUploadURL(_ request: V1.CreateUploadUrlRequest, _ context: ServerContext) async throws
        -> V1.CreateUploadUrlResponse
    {
        let caller = try await self.access.requireUser(context)
        guard let media = self.media else {
            throw ProfileError(.unimplemented, "NOT_CONFIGURED", "This deployment serves no upload URLs")
        }
        guard request.position >= 0 else { throw ProfileError.invalid("position", "OUT_OF_RANGE", ">= 0") }
        try await self.requireRoomForAPhoto(caller.id)
        // Any position past the end appends; the URL's is at most 999 (more than any community's max_photos).
        var answer = try media.upload(userID: caller.id.lowercased(), position: min(request.position, 999))
        answer.maxSizeBytes = Int64(Self.maxUploadBytes)
        return answer
    }

    /// Refuses a new photo for a member without an active profile (NOT_FOUND) or whose profile holds its
    /// community's `max_photos` (FAILED_PRECONDITION): for an upload, and for an upload URL before it is handed out.
    private func requireRoomForAPhoto(_ userID: String) async throws {
        guard let profile = try await self.record(userID), !profile.deactivated else {
            throw ProfileError.profileNotFound
        }
        let settings = try await self.settings(of: profile.communityID)
        guard profile.photos.count < Int(settings.maxPhotos) else { throw Self.photoLimitReached }
    }

    /// The answer to a retried upload key: the photo the first attempt stored; ALREADY_EXISTS when the retry
    /// declares a different SHA-256 than the stored original's (another photo sent under a used key).
    private func existingUpload(_ userID: String, _ key: String, sha256: [UInt8]) async throws -> V1.UploadPhotoResponse? {
        guard let first = try await self.photos.photo(userID: userID, uploadKey: key, in: self.database) else {
            return nil
        }
        guard sha256.isEmpty || sha256 == first.contentHash else { throw Self.uploadKeyReused }
        return try await self.uploadResponse(userID, photoID: first.id)
    }

    private func uploadResponse(_ userID: String, photoID: String) async throws -> V1.UploadPhotoResponse {
        let all = try await self.photos.photos(of: [userID], in: self.database)[userID] ?? []
        return .with {
            $0.photos = all.map(self.media.photo)
            $0.photo = all.first { $0.id == photoID }.map(self.media.photo)
        }
    }

    /// GetPhoto: the owner, admins, services (for `viewer_user_id` when given), and members who may see the owner's
    /// card. NOT_FOUND otherwise, indistinguishable from an unknown photo. A matching etag answers not_modified.
    func getPhoto(_ request: V1.GetPhotoRequest, _ context: ServerContext) async throws -> V1.GetPhotoResponse {
        let caller = try await self.access.authenticate(context)
        guard Self.isUUID(request.photoId) else { throw ProfileError.photoNotFound }
        let format: String
        switch request.format {
        case "", "jpeg": format = "jpeg"
        case "webp": format = "webp"
        default: throw ProfileError.invalid("format", "OUT_OF_RANGE", "jpeg or webp")
        }
        let variant: Kindred.Common.V1.PhotoVariant
        switch request.variant {
        case .unspecified: variant = .card
        case .full, .card, .thumbnail, .icon: variant = request.variant
        default: throw ProfileError.invalid("variant", "OUT_OF_RANGE", "a known variant")
        }
        guard let photo = try await self.photos.photo(request.photoId, in: self.database) else {
            throw ProfileError.photoNotFound
        }
        let viewer = caller.userID ?? (request.viewerUserId.isEmpty ? nil : request.viewerUserId)
        if caller.isService, viewer == nil, try await self.record(photo.userID)?.deactivated ?? true {
            // The media port's signed URLs name no viewer: a deactivated member's photos are gone from there at
            // once, whatever URLs are still out (removed and deleted photos have no row at all).
            throw ProfileError.photoNotFound
        }
        if !(caller.isAdmin || (caller.isService && viewer == nil) || viewer == photo.userID) {
            guard let viewer, try await self.canSee(viewer: viewer, tokenCommunity: caller.claims.cid, owner: photo.userID)
            else { throw ProfileError.photoNotFound }
        }
        guard let rendition = photo.renditions.first(where: { $0.variant == variant.rawValue && $0.format == format })
        else { throw ProfileError.photoNotFound }
        let etag = PhotoVariants.etag(photoID: photo.id, version: photo.version, variant: rendition.variant, format: format)
        var response = V1.GetPhotoResponse()
        response.etag = etag
        response.contentType = format == "webp" ? "image/webp" : "image/jpeg"
        response.width = rendition.width
        response.height = rendition.height
        response.version = photo.version
        response.cacheMaxAgeSeconds = PhotoVariants.cacheMaxAgeSeconds
        if !request.ifNoneMatch.isEmpty, request.ifNoneMatch == etag {
            response.notModified = true
            return response
        }
        guard let bytes = try await self.blobs.get(key: rendition.blobKey) else {
            self.logger.error("photo bytes missing from the store", metadata: ["photo.id": "\(photo.id)"])
            throw ProfileError.photoNotFound
        }
        response.data = bytes
        return response
    }

    /// Whether `viewer` may see `owner`'s card (and so their photos).
    func canSee(viewer: String, tokenCommunity: String?, owner: String) async throws -> Bool {
        let records = try await self.records([viewer, owner])
        guard let target = records[owner] else { return false }
        guard let community = tokenCommunity ?? records[viewer]?.communityID else { return false }
        let settings = try await self.settings(of: target.communityID)
        let relations = try await self.relations.relations(between: viewer, and: [owner])
        var withinPreferences = true
        if ProfileViews.needsCardCheck(
            target, settings: settings, viewer: viewer, viewerCommunity: community, relations: relations)
        {
            withinPreferences = try await self.cardCheck.shown([owner], to: viewer).contains(owner.lowercased())
        }
        return ProfileViews.isVisible(
            target, settings: settings, viewer: viewer, viewerCommunity: community, relations: relations,
            withinPreferences: withinPreferences)
    }

    /// DeletePhoto: the owner, or an admin (moderation). Deleting a photo that no longer exists is OK (idempotent);
    /// another user's photo is NOT_FOUND. The bytes leave the store after the commit.
    func deletePhoto(_ request: V1.DeletePhotoRequest, _ context: ServerContext) async throws -> V1.DeletePhotoResponse {
        let caller = try await self.access.authenticate(context)
        guard let callerID = caller.userID else { throw ProfileError.permissionDenied }
        guard Self.isUUID(request.photoId) else { throw ProfileError.photoNotFound }
        let owner: String
        if let photo = try await self.photos.photo(request.photoId, in: self.database) {
            guard photo.userID == callerID || caller.isAdmin else { throw ProfileError.photoNotFound }
            owner = photo.userID
        } else {
            owner = callerID
        }
        let unreferenced = try await self.database.withTransaction { transaction -> [String] in
            guard let current = try await self.lockedRecord(owner, in: transaction) else { return [] }
            guard let keys = try await self.photos.delete(request.photoId, userID: owner, in: transaction) else {
                return []
            }
            try await self.profiles.touch(userID: owner, card: true, in: transaction)
            let record = try await self.reread(owner, in: transaction)
            let settings = try await self.settings(of: current.communityID, in: transaction)
            try await self.appendProfileUpdated(record, settings: settings, changed: ["photos"], in: transaction)
            return keys
        }
        try await self.blobs.delete(keys: unreferenced)
        try await self.awaitReaders(of: owner)
        let remaining = try await self.photos.photos(of: [owner], in: self.database)[owner] ?? []
        return .with { $0.photos = remaining.map(self.media.photo) }
    }

    /// ReorderPhotos: the user; exactly the profile's photo ids, each once.
    func reorderPhotos(_ request: V1.ReorderPhotosRequest, _ context: ServerContext) async throws
        -> V1.ReorderPhotosResponse
    {
        let caller = try await self.access.requireUser(context)
        try await self.database.withTransaction { transaction in
            guard let current = try await self.lockedRecord(caller.id, in: transaction) else {
                throw ProfileError.profileNotFound
            }
            let ids = current.photos.map(\.id)
            guard request.photoIds.count == ids.count, Set(request.photoIds) == Set(ids) else {
                throw ProfileError.invalid("photo_ids", "NOT_A_PERMUTATION", "every photo id of the profile exactly once")
            }
            guard request.photoIds != ids else { return }
            try await self.photos.renumber(userID: caller.id, request.photoIds, in: transaction)
            try await self.profiles.touch(userID: caller.id, card: true, in: transaction)
            let record = try await self.reread(caller.id, in: transaction)
            let settings = try await self.settings(of: current.communityID, in: transaction)
            try await self.appendProfileUpdated(record, settings: settings, changed: ["photos"], in: transaction)
        }
        let photos = try await self.photos.photos(of: [caller.id], in: self.database)[caller.id] ?? []
        return .with { $0.photos = photos.map(self.media.photo) }
    }
}
