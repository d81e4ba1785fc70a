import KindredGRPC
import KindredProto

/// `kindred.api.v1.ProfileService`: communities, the caller's profile, other members' cards, photos and location,
/// served by the profile service (which checks the forwarded access token and every id itself). Without
/// `KINDRED_GATEWAY_PROFILE_ADDRESS` every RPC answers UNIMPLEMENTED (NOT_DEPLOYED).
struct ProfileAPI: GRPCService {
    let gateway: Gateway

    /// The upload cap the gateway enforces while streaming, the same as the profile service's.
    static let maxUploadBytes: Int64 = 15 * 1024 * 1024
    /// The chunk size uploads are forwarded in (the profile service's largest).
    static let chunkBytes = 1 << 20
    /// Uploads take longer than the unary default deadline.
    static let uploadTimeout: Duration = .seconds(60)

    func register(in router: inout GRPCRouter) {
        typealias M = Api.ProfileService.Method
        typealias P = ProfileApi.ProfileService.Method
        typealias C = ProfileApi.CommunityService.Method
        let gateway = self.gateway

        router.unary(M.getCommunity) { request, context in
            let caller = try await gateway.admit(context, request.communityId.isEmpty ? .user : .anyone)
            var forwarded = ProfileApi.GetCommunityRequest()
            forwarded.communityId = request.communityId
            let response = try await gateway.profileService().call(C.getCommunity, forwarded, as: caller)
            var answer = Api.GetCommunityResponse()
            answer.community = response.community
            return answer
        }
        router.unary(M.createProfile) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = ProfileApi.CreateProfileRequest()
            forwarded.fields = request.fields.map(ProfileApi.ProfileFields.init)
            forwarded.idempotencyKey = request.idempotencyKey
            let response = try await gateway.profileService().call(P.createProfile, forwarded, as: caller)
            var answer = Api.CreateProfileResponse()
            answer.profile = response.profile.map(Api.MyProfile.init)
            return answer
        }
        router.unary(M.getMyProfile) { _, context in
            let caller = try await gateway.admit(context, .user)
            var answer = Api.GetMyProfileResponse()
            answer.profile = try await gateway.ownProfile(caller)
            return answer
        }
        router.unary(M.getProfile) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = ProfileApi.GetProfilesRequest()
            forwarded.userIds = [request.userId]
            let response = try await gateway.profileService().call(P.getProfiles, forwarded, as: caller)
            guard let card = response.profiles.first else {
                throw GatewayErrors.make(.notFound, "No such member", reason: "NOT_FOUND")
            }
            // match_id and direction come with the match service.
            var answer = Api.GetProfileResponse()
            answer.profile = Api.ProfileCard(card)
            return answer
        }
        router.unary(M.updateProfile) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = ProfileApi.UpdateProfileRequest()
            forwarded.fields = request.fields.map(ProfileApi.ProfileFields.init)
            forwarded.updatePaths = request.updatePaths
            forwarded.expectedVersion = request.expectedVersion
            let response = try await gateway.profileService().call(P.updateProfile, forwarded, as: caller)
            var answer = Api.UpdateProfileResponse()
            answer.profile = response.profile.map(Api.MyProfile.init)
            return answer
        }
        router.unary(M.updateLocation) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = ProfileApi.UpdateLocationRequest()
            forwarded.location = request.location
            let response = try await gateway.profileService().call(P.updateLocation, forwarded, as: caller)
            var answer = Api.UpdateLocationResponse()
            answer.locationUpdatedUnixMs = response.locationUpdatedUnixMs
            answer.nextUpdateAllowedUnixMs = response.nextUpdateAllowedUnixMs
            return answer
        }
        router.clientStreaming(M.uploadPhoto) { requests, context in
            let caller = try await gateway.admit(context, .user)
            return try await gateway.proxyUpload(requests, caller)
        }
        router.unary(M.createUploadUrl) { request, context in
            let caller = try await gateway.admit(context, .user)
            guard gateway.configuration.mediaListen != nil, gateway.configuration.mediaURLKey != nil else {
                throw GatewayErrors.notDeployed("Uploads by URL")
            }
            var forwarded = ProfileApi.CreateUploadUrlRequest()
            forwarded.position = request.position
            let response = try await gateway.profileService().call(P.createUploadUrl, forwarded, as: caller)
            var answer = Api.CreateUploadUrlResponse()
            answer.uploadUrl = response.uploadUrl
            answer.uploadId = response.uploadId
            answer.expiresUnix = response.expiresUnix
            answer.maxSizeBytes = response.maxSizeBytes
            return answer
        }
        router.unary(M.getPhoto) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = ProfileApi.GetPhotoRequest()
            forwarded.photoId = request.photoId
            forwarded.variant = request.variant
            forwarded.ifNoneMatch = request.ifNoneMatch
            forwarded.format = request.format
            let response = try await gateway.profileService().call(P.getPhoto, forwarded, as: caller)
            var answer = Api.GetPhotoResponse()
            answer.notModified = response.notModified
            answer.etag = response.etag
            answer.contentType = response.contentType
            answer.data = response.data
            answer.width = response.width
            answer.height = response.height
            answer.version = response.version
            answer.cacheMaxAgeSeconds = response.cacheMaxAgeSeconds
            return answer
        }
        router.unary(M.deletePhoto) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = ProfileApi.DeletePhotoRequest()
            forwarded.photoId = request.photoId
            let response = try await gateway.profileService().call(P.deletePhoto, forwarded, as: caller)
            var answer = Api.DeletePhotoResponse()
            answer.photos = response.photos.map(Api.Photo.init)
            return answer
        }
        router.unary(M.reorderPhotos) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = ProfileApi.ReorderPhotosRequest()
            forwarded.photoIds = request.photoIds
            let response = try await gateway.profileService().call(P.reorderPhotos, forwarded, as: caller)
            var answer = Api.ReorderPhotosResponse()
            answer.photos = response.photos.map(Api.Photo.init)
            return answer
        }
    }
}

extension Gateway {
    /// The profile service, or UNIMPLEMENTED (NOT_DEPLOYED) when this cluster does not run it.
    func profileService() throws(RPCError) -> Downstream {
        guard let profile = self.profile else { throw GatewayErrors.notDeployed("The profile service") }
        return profile
    }

    /// The caller's own profile (GetMyProfile and Home's profile part); nil when they have none yet.
    func ownProfileOrNil(_ caller: Caller) async throws -> Api.MyProfile? {
        let profile = try self.profileService()
        let response: ProfileApi.GetProfileResponse
        do {
            response = try await profile.call(
                ProfileApi.ProfileService.Method.getProfile, ProfileApi.GetProfileRequest(), as: caller)
        } catch {
            if error.code == .notFound { return nil }
            throw error
        }
        return response.profile.map(Api.MyProfile.init)
    }

    func ownProfile(_ caller: Caller) async throws -> Api.MyProfile {
        guard let profile = try await self.ownProfileOrNil(caller) else {
            throw GatewayErrors.make(.notFound, "No profile yet: create it", reason: "PROFILE_NOT_FOUND")
        }
        return profile
    }

    /// The caller's community configuration (Home's community part).
    func ownCommunity(_ caller: Caller) async throws -> Kindred.Common.V1.Community? {
        try await self.profileService().call(
            ProfileApi.CommunityService.Method.getCommunity, ProfileApi.GetCommunityRequest(), as: caller
        ).community
    }

    /// UploadPhoto through: each message is converted and forwarded as it arrives, and the next one is read only
    /// after the profile service took it (its flow control reaches the client: backpressure). The header's size
    /// and the bytes are checked against the same 15 MiB cap on the way, so an oversized upload stops here.
    func proxyUpload(_ requests: RequestStream<Api.UploadPhotoRequest>, _ caller: Caller) async throws
        -> Api.UploadPhotoResponse
    {
        let profile = try self.profileService()
        let response: ProfileApi.UploadPhotoResponse
        // An error of the gateway's own checks goes to the client as is; anything else came from the service.
        var refusal: RPCError?
        func refuse(_ error: RPCError) -> RPCError {
            refusal = error
            return error
        }
        do {
            response = try await profile.client.clientStreaming(
                ProfileApi.ProfileService.Method.uploadPhoto, metadata: caller.forwardedMetadata,
                options: CallOptions(timeout: ProfileAPI.uploadTimeout)
            ) { writer in
                var declared: Int64 = -1
                var received: Int64 = 0
                for try await message in requests {
                    var forwarded = ProfileApi.UploadPhotoRequest()
                    switch message.part {
                    case .header(let header)?:
                        guard declared < 0 else { throw refuse(Self.uploadProtocol("The header comes once, first")) }
                        guard (1...ProfileAPI.maxUploadBytes).contains(header.totalSizeBytes) else {
                            throw refuse(
                                GatewayErrors.make(
                                    .invalidArgument, "total_size_bytes must be 1..\(ProfileAPI.maxUploadBytes)",
                                    reason: "INVALID_ARGUMENT"))
                        }
                        declared = header.totalSizeBytes
                        forwarded.part = .header(
                            .with {
                                $0.contentType = header.contentType
                                $0.totalSizeBytes = header.totalSizeBytes
                                $0.sha256 = header.sha256
                                $0.position = header.position
                                $0.idempotencyKey = header.idempotencyKey
                            })
                    case .chunk(let chunk)?:
                        guard declared >= 0 else { throw refuse(Self.uploadProtocol("The header comes first")) }
                        received += Int64(chunk.count)
                        guard received <= declared else {
                            throw refuse(
                                GatewayErrors.make(
                                    .resourceExhausted, "More bytes than total_size_bytes declared",
                                    reason: "UPLOAD_TOO_LARGE"))
                        }
                        forwarded.part = .chunk(chunk)
                    case nil:
                        throw refuse(Self.uploadProtocol("Each message is a header or a chunk"))
                    }
                    do {
                        try await writer.write(forwarded)
                    } catch {
                        // The service answered before the end (an early refusal, or a retried upload key): its
                        // status, read next, says why; the client's remaining bytes are not needed.
                        break
                    }
                }
            }
            self.metrics.downstreamFinished(service: "profile", code: .ok)
        } catch {
            if let refusal { throw refusal }
            self.metrics.downstreamFinished(service: "profile", code: (error as? RPCError)?.code ?? .unavailable)
            throw GatewayErrors.fromDownstream(error, service: "profile", logger: self.logger)
        }
        return Api.UploadPhotoResponse(response)
    }

    private static func uploadProtocol(_ message: String) -> RPCError {
        GatewayErrors.make(.invalidArgument, message, reason: "INVALID_ARGUMENT")
    }
}

// MARK: Administration (AdminService)

extension Gateway {
    /// AdminService/RemovePhoto: the profile service's DeletePhoto as an admin (moderation).
    func removePhoto(_ request: Api.RemovePhotoRequest, _ context: ServerContext) async throws -> Api.RemovePhotoResponse {
        let caller = try await self.admit(context, .admin)
        var forwarded = ProfileApi.DeletePhotoRequest()
        forwarded.photoId = request.photoId
        _ = try await self.profileService().call(ProfileApi.ProfileService.Method.deletePhoto, forwarded, as: caller)
        return Api.RemovePhotoResponse()
    }

    func listCommunities(_ request: Api.ListCommunitiesRequest, _ context: ServerContext) async throws
        -> Api.ListCommunitiesResponse
    {
        let caller = try await self.admit(context, .admin)
        var forwarded = ProfileApi.ListCommunitiesRequest()
        forwarded.pageSize = request.pageSize
        forwarded.pageToken = request.pageToken
        let response = try await self.profileService().call(
            ProfileApi.CommunityService.Method.listCommunities, forwarded, as: caller)
        var answer = Api.ListCommunitiesResponse()
        answer.communities = response.communities
        answer.nextPageToken = response.nextPageToken
        return answer
    }

    func createCommunity(_ request: Api.CreateCommunityRequest, _ context: ServerContext) async throws
        -> Api.CreateCommunityResponse
    {
        let caller = try await self.admit(context, .admin)
        var forwarded = ProfileApi.CreateCommunityRequest()
        forwarded.communityId = request.communityId
        forwarded.displayName = request.displayName
        forwarded.settings = request.settings
        let response = try await self.profileService().call(
            ProfileApi.CommunityService.Method.createCommunity, forwarded, as: caller)
        var answer = Api.CreateCommunityResponse()
        answer.community = response.community
        return answer
    }

    func updateCommunity(_ request: Api.UpdateCommunityRequest, _ context: ServerContext) async throws
        -> Api.UpdateCommunityResponse
    {
        let caller = try await self.admit(context, .admin)
        var forwarded = ProfileApi.UpdateCommunityRequest()
        forwarded.communityId = request.communityId
        forwarded.displayName = request.displayName
        forwarded.settings = request.settings
        forwarded.updatePaths = request.updatePaths
        forwarded.expectedVersion = request.expectedVersion
        let response = try await self.profileService().call(
            ProfileApi.CommunityService.Method.updateCommunity, forwarded, as: caller)
        var answer = Api.UpdateCommunityResponse()
        answer.community = response.community
        return answer
    }

}

// MARK: Field by field

extension ProfileApi.ProfileFields {
    init(_ fields: Api.ProfileFields) {
        self.init()
        self.displayName = fields.displayName
        self.birthDate = fields.birthDate
        self.gender = fields.gender
        self.interestedIn = fields.interestedIn
        self.bio = fields.bio
        self.attributes = fields.attributes
        self.ageMinYears = fields.ageMinYears
        self.ageMaxYears = fields.ageMaxYears
        self.maxDistanceKm = fields.maxDistanceKm
        self.paused = fields.paused
        self.hideDistance = fields.hideDistance
        self.interests = fields.interests
        self.jobTitle = fields.jobTitle
        self.city = fields.city
    }
}

extension Api.ProfileFields {
    init(_ fields: ProfileApi.ProfileFields) {
        self.init()
        self.displayName = fields.displayName
        self.birthDate = fields.birthDate
        self.gender = fields.gender
        self.interestedIn = fields.interestedIn
        self.bio = fields.bio
        self.attributes = fields.attributes
        self.ageMinYears = fields.ageMinYears
        self.ageMaxYears = fields.ageMaxYears
        self.maxDistanceKm = fields.maxDistanceKm
        self.paused = fields.paused
        self.hideDistance = fields.hideDistance
        self.interests = fields.interests
        self.jobTitle = fields.jobTitle
        self.city = fields.city
    }
}

extension Api.Photo {
    init(_ photo: ProfileApi.Photo) {
        self.init()
        self.photoId = photo.photoId
        self.position = photo.position
        self.version = photo.version
        self.width = photo.width
        self.height = photo.height
        self.urls = photo.urls.map { url in
            var converted = Api.PhotoUrl()
            converted.variant = url.variant
            converted.format = url.format
            converted.url = url.url
            converted.width = url.width
            converted.height = url.height
            converted.expiresUnix = url.expiresUnix
            return converted
        }
    }
}

extension Api.UploadPhotoResponse {
    /// UploadPhoto's answer as the API gives it (gRPC UploadPhoto and a PUT to an upload URL).
    init(_ response: ProfileApi.UploadPhotoResponse) {
        self.init()
        self.photo = response.photo.map(Api.Photo.init)
        self.photos = response.photos.map(Api.Photo.init)
    }
}

extension Api.MyProfile {
    init(_ profile: ProfileApi.Profile) {
        self.init()
        self.userId = profile.userId
        self.fields = profile.fields.map(Api.ProfileFields.init)
        self.photos = profile.photos.map(Api.Photo.init)
        self.ageYears = profile.ageYears
        self.locationSet = profile.locationSet
        self.locationUpdatedUnixMs = profile.locationUpdatedUnixMs
        self.eligible = profile.eligible
        self.missingRequirements = profile.missingRequirements
        self.version = profile.version
        self.createdUnixMs = profile.createdUnixMs
        self.updatedUnixMs = profile.updatedUnixMs
    }
}

extension Api.ProfileCard {
    init(_ card: ProfileApi.ProfileCard) {
        self.init()
        self.userId = card.userId
        self.displayName = card.displayName
        self.ageYears = card.ageYears
        self.gender = card.gender
        self.bio = card.bio
        self.attributes = card.attributes
        self.photos = card.photos.map(Api.Photo.init)
        self.distanceKm = card.distanceKm
        self.version = card.version
        self.interests = card.interests
        self.jobTitle = card.jobTitle
        self.city = card.city
    }
}
