/// How the recommender is tuned. The defaults are what the quality harness's validation split preferred
/// (`kindred-discovery-quality tune`; the held-out test swipes are never seen while choosing).
public struct RecommenderSettings: Sendable {
    /// Pseudo-swipes at the population like rate in a member's own like rate: how many swipes it takes before
    /// their choosiness (the per-user intercept on the logit scale) weighs as much as the population's.
    public var interceptPseudoSwipes: Double = 30
    /// Pseudo-swipes of the appeal estimate (a candidate's appeal starts at the population's).
    public var appealPseudoSwipes: Double = 5
    /// Pseudo-swipes of the taste estimate (a few swipes say little about taste).
    public var tastePseudoSwipes: Double = 40
    /// Taste directions used (0…4; 0 = no taste feature).
    public var tasteComponents: Int = 4
    /// Ridge strength of the population model towards `Recommender.initialPrior` (only matters early on).
    public var populationLambda: Double = 1
    /// The population model (the slopes every member shares, on the logit scale) is refitted after this many
    /// new swipes, or a quarter of its sample if more (so the cost per swipe stays bounded).
    public var populationRefreshSwipes: Int = 1024
    /// Swipes kept as a uniform sample (reservoir) to fit the population model on: 65,536 × 48 bytes.
    public var populationSampleSwipes: Int = 65536
    /// Members sampled to estimate the taste directions.
    public var tasteSampleMembers: Int = 50000
    /// Half-life of the activity feature.
    public var activityHalfLifeMs: Double = 7 * 24 * 3600 * 1000

    public init() {}
}
