import KindredGRPC
import KindredPostgres
import KindredProto

extension ProfileService {
    /// UpdateLocation: the user. The point is validated and snapped to a precision-7 cell at once; only the cell is
    /// stored and nothing returns it. At most one update per interval; a jump faster than an airliner since the
    /// last update is refused. LocationChanged goes out when the precision-6 cell changed.
    func updateLocation(_ request: V1.UpdateLocationRequest, _ context: ServerContext) async throws
        -> V1.UpdateLocationResponse
    {
        let caller = try await self.access.requireUser(context)
        guard let point = request.location else {
            throw ProfileError.invalid("location", "REQUIRED", "latitude_deg and longitude_deg")
        }
        let interval = LocationRules.milliseconds(self.locationRules.minimumInterval)
        let response = try await self.database.withTransaction { transaction -> V1.UpdateLocationResponse in
            guard let current = try await self.lockedRecord(caller.id, in: transaction) else {
                throw ProfileError.profileNotFound
            }
            let now = Self.nowMilliseconds()
            let previous = current.locationCell.map {
                LocationRules.Previous(cell: $0, unixMilliseconds: current.locationUpdatedUnixMs)
            }
            switch self.locationRules.decide(
                latitude: point.latitudeDeg, longitude: point.longitudeDeg, previous: previous, nowUnixMilliseconds: now)
            {
            case .invalid(let field):
                throw ProfileError.invalid(field, "OUT_OF_RANGE", "finite degrees: latitude -90..90, longitude -180..180")
            case .tooSoon(let retryAt):
                throw ProfileError.rateLimited(
                    "One location update per \(interval / 1000) s", retryAfter: .milliseconds(max(1, retryAt - now)))
            case .implausibleJump:
                throw ProfileError(
                    .failedPrecondition, "IMPLAUSIBLE_LOCATION_JUMP",
                    "The location moved faster than 1000 km/h since the last update")
            case .accept(let cell, let sharedChanged):
                try await self.profiles.setLocation(userID: caller.id, cell: cell, atUnixMs: now, in: transaction)
                try await self.profiles.touch(userID: caller.id, card: false, in: transaction)
                let record = try await self.reread(caller.id, in: transaction)
                let settings = try await self.settings(of: record.communityID, in: transaction)
                if sharedChanged {
                    var event = Kindred.Common.V1.Event()
                    event.userId = record.userID
                    event.communityId = record.communityID
                    event.payload = .locationChanged(
                        .with { $0.snapshot = ProfileViews.snapshot(record, settings: settings) })
                    try await Self.outbox.append(event, in: transaction)
                }
                if current.locationCell == nil, ProfileViews.eligibility(record, settings: settings).eligible {
                    // The first location can complete the profile: discovery learns it is eligible now.
                    try await self.appendProfileUpdated(record, settings: settings, changed: ["eligible"], in: transaction)
                }
                return .with {
                    $0.cellChanged = cell != current.locationCell
                    $0.locationUpdatedUnixMs = now
                    $0.nextUpdateAllowedUnixMs = now + interval
                }
            }
        }
        // The member's next deck call measures from the new place (discovery) and may swipe at once (match).
        try await self.awaitReaders(of: caller.id)
        return response
    }
}
