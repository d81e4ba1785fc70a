import KindredGeo

/// Which members a replica's deck walk may meet: with discovery shards (`DiscoveryShards`), those within
/// `reachKm` of a cell the replica owns, where `reachKm` covers the farthest a deck, search or candidate check
/// reaches (the community's `max_radius_km`) plus the margin of the walk's cells (a precision-5 bucket visited
/// at the circle's edge holds members up to ~7 km beyond it). One shard: everyone.
public struct IndexRegion: Sendable, Equatable {
    public var shards: DiscoveryShards
    public var reachKm: Double

    public static let everywhere = IndexRegion(shards: .single, reachKm: 0)

    /// Kilometres added to the widest radius: the visited cells' overhang plus rounding.
    public static let walkMarginKm = 10.0

    public init(shards: DiscoveryShards, reachKm: Double) {
        self.shards = shards
        self.reachKm = reachKm
    }

    /// The region of shard `shards` for a community whose decks reach at most `maxRadiusKm`.
    public init(shards: DiscoveryShards, maxRadiusKm: Int) {
        self.init(shards: shards, reachKm: shards.isSharded ? Double(maxRadiusKm) + Self.walkMarginKm : 0)
    }

    func holds(latitude: Double, longitude: Double) -> Bool {
        self.shards.holds(latitude: latitude, longitude: longitude, reachKm: self.reachKm)
    }

    /// Whether a member here is served by this replica as a viewer (their cell is one of its own).
    func owns(latitude: Double, longitude: Double) -> Bool {
        !self.shards.isSharded || self.shards.owner(latitude: latitude, longitude: longitude) == self.shards.index
    }
}
