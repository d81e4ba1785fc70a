import KindredGRPC
import KindredProto

extension Gateway {
    /// Profile cards of `ids` as the caller sees them, within the part deadline. `complete` is false when
    /// profile is not deployed, failed or was late (the cards are then empty). `source`: the list the ids come
    /// from, when it holds only members within the caller's preferences (their deck, top picks or search, or
    /// their likes received): the gateway vouches for the page with its own service token, naming the caller as
    /// the viewer, and profile does not ask discovery again. Other ids (GetProfile, UndoPass, matches) go with
    /// the caller's token and are checked (matches need no check: profile knows them).
    func cards(
        for ids: [String], _ caller: Caller, source: ProfileApi.CardSource = .unspecified
    ) async -> (cards: [String: Api.ProfileCard], complete: Bool) {
        let ids = Array(Set(ids.filter { !$0.isEmpty }))
        guard !ids.isEmpty else { return ([:], true) }
        guard let profile = self.profile else {
            self.metrics.partMissing("cards.profiles")
            return ([:], false)
        }
        let tokens = self.serviceTokens
        let fetched = await withinDeadline(self.configuration.partTimeout) {
            var request = ProfileApi.GetProfilesRequest()
            request.userIds = ids
            let response: ProfileApi.GetProfilesResponse
            if source != .unspecified, let tokens, let viewer = caller.userID {
                request.viewerUserId = viewer
                request.source = source
                var metadata = try await tokens.metadata()
                metadata.add("x-kindred-client-ip", caller.clientAddress)
                response = try await profile.call(
                    ProfileApi.ProfileService.Method.getProfiles, request, metadata: metadata)
            } else {
                response = try await profile.call(ProfileApi.ProfileService.Method.getProfiles, request, as: caller)
            }
            return Dictionary(response.profiles.map { ($0.userId, Api.ProfileCard($0)) }) { first, _ in first }
        }
        guard let fetched else {
            self.metrics.partMissing("cards.profiles")
            return ([:], false)
        }
        return (fetched, true)
    }
}
