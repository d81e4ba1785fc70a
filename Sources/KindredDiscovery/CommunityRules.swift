import KindredProto

/// What discovery keeps of a community's configuration (profile's CommunityUpdated): radii and which
/// attributes are filterable, ranking features or text. Until the event arrives, the contract's defaults.
public struct CommunityRules: Sendable, Equatable {
    public var defaultRadiusKm: Int = 50
    public var maxRadiusKm: Int = 160
    /// Filterable attribute keys and their types (SearchMembers and deck filters accept only these).
    public var filterable: [String: Kindred.Common.V1.AttributeType] = [:]
    /// Ranking-feature attribute keys ("shares this value" is a signal).
    public var ranking: Set<String> = []
    public var version: Int64 = 0

    public init() {}

    public init(_ community: Kindred.Common.V1.Community) {
        let settings = community.settings ?? Kindred.Common.V1.CommunitySettings()
        if settings.defaultRadiusKm > 0 { self.defaultRadiusKm = Int(settings.defaultRadiusKm) }
        if settings.maxRadiusKm > 0 { self.maxRadiusKm = max(Int(settings.maxRadiusKm), self.defaultRadiusKm) }
        for definition in settings.attributeDefinitions {
            if definition.filterable { self.filterable[definition.key] = definition.attributeType }
            if definition.rankingFeature { self.ranking.insert(definition.key) }
        }
        self.version = community.version
    }
}
