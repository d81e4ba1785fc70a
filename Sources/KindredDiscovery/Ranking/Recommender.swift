import Foundation

/// What the ranking model needs to know about one member, in the compact form the in-memory index keeps.
public struct RankingProfile: Sendable, Equatable {
    /// Interests folded into bits.
    public var interests: InterestSet
    /// Values of the community's ranking attributes, folded into bits per (key, value) pair.
    public var attributes: InterestSet
    /// Age in whole years.
    public var ageYears: Int
    /// Last activity, UTC milliseconds.
    public var lastActiveUnixMs: Int64

    public init(interests: InterestSet, attributes: InterestSet, ageYears: Int, lastActiveUnixMs: Int64) {
        self.interests = interests
        self.attributes = attributes
        self.ageYears = ageYears
        self.lastActiveUnixMs = lastActiveUnixMs
    }
}

/// How the recommender is tuned. The defaults are what the quality harness
/// (`Tests/Benchmarks/discovery-quality.sh`) measured best on generated populations.
public struct RecommenderSettings: Sendable {
    /// Ridge strength of a user's model towards the population prior: roughly the number of swipes after
    /// which the user's own behaviour weighs as much as everyone's. Large: what differs between people is
    /// mostly how choosy they are (the intercept) and their taste (its own feature), not how they weigh
    /// the features — the validation split of the quality harness preferred 500 to 12…150.
    public var userLambda: Double = 500
    /// Ridge strength of the intercept (the user's own like rate, i.e. how choosy they are) towards the
    /// population's: smaller than `userLambda`, because a like rate is learnt from few swipes while the
    /// slopes need many.
    public var interceptLambda: Double = 30
    /// Ridge strength of the population model towards zero (only keeps it solvable early on).
    public var populationLambda: Double = 1
    /// Pseudo-swipes of the appeal estimate: a candidate's appeal starts at the population like rate and
    /// moves to their own like rate as swipes on them accumulate.
    public var appealPseudoSwipes: Double = 10
    /// The population prior is re-solved after this many new swipes (solving is cheap; this keeps every
    /// user's cached weights valid between re-solves).
    public var populationRefreshSwipes: Int = 256
    /// Shared directions of taste kept by the taste feature (`TasteProfile.basis`); 0 = raw per-bit lifts.
    public var tasteComponents: Int = 4
    /// The taste directions are re-estimated after this many new swipes (or as many as there are swipers,
    /// if more: each re-estimate re-projects every swiper's taste, ~600 multiply-adds each, so the cost per
    /// swipe stays bounded), from at most `tasteSampleSwipers` swipers' profiles.
    public var tasteRefreshSwipes: Int = 16384
    public var tasteSampleSwipers: Int = 20000
    /// Half-life of the activity feature.
    public var activityHalfLifeMs: Double = 7 * 24 * 3600 * 1000

    public init() {}
}

/// The learning part of discovery: per-user ridge models over `RankingFeatures`, a population prior for
/// users with few swipes, each candidate's appeal, each viewer's taste — all updated on every swipe event —
/// and the match score that ranks a deck:
///
///     score(viewer, candidate) = P(viewer likes candidate) × P(candidate likes viewer)
///
/// where the second factor is the candidate's own model applied to the viewer (the reciprocal term of
/// RECON-style reciprocal recommenders): a deck of people the viewer likes but who never like back
/// produces likes, not matches. Members are dense integer handles assigned by the candidate index.
/// Not thread-safe: its owner (the index actor) serialises access.
public struct Recommender: Sendable {
    public var settings: RecommenderSettings
    private var learners: [Int: Learner] = [:]
    private var appeal: [Int: Appeal] = [:]
    private var population = RidgeStatistics()
    private var populationLikes = 0
    private var populationWeights: SIMD8<Double>
    private var populationVersion = 0
    private var swipesSinceRefresh = 0
    private var tasteBasis: [SIMD64<Float>] = []
    private var swipesSinceTasteRefresh = 0
    private var tasteVersion = 0

    private struct Learner: Sendable {
        var statistics = RidgeStatistics()
        var taste = TasteProfile()
        /// `taste` projected onto the population's taste directions of `tasteVersion` (nil = stale).
        var projected: (lift: SIMD64<Float>, version: Int)?
        /// Weights solved against `populationVersion`; nil = stale.
        var cached: (weights: SIMD8<Double>, version: Int)?
    }

    /// Likes a member received beyond what each swiper's own like rate predicted: a like from a choosy
    /// swiper says more than one from someone who likes everybody.
    private struct Appeal: Sendable {
        var surplus: Float = 0
        var swipes: Int32 = 0
    }

    /// A starting prior before any swipe: mild preferences everyone shares (intercept 0.3, shared interests,
    /// closeness, appeal and taste up, age gap down). Ridge pulls it to the data within a few hundred swipes.
    public static let initialPrior = SIMD8<Double>(0.25, 0.2, 0.1, 0.1, -0.1, 0.3, 0.1, 0.05)

    public init(settings: RecommenderSettings = RecommenderSettings()) {
        self.settings = settings
        self.populationWeights = Self.initialPrior
    }

    /// The swipes the model has learned from.
    public var swipeCount: Int { population.count }

    /// Share of likes among all swipes seen (0.3 before any).
    public var populationLikeRate: Double {
        population.count == 0 ? 0.3 : Double(populationLikes) / Double(population.count)
    }

    /// The features of `viewer` looking at `candidate`.
    public func features(
        viewer: Int,
        _ viewerProfile: RankingProfile,
        candidate: Int,
        _ candidateProfile: RankingProfile,
        distanceKm: Int,
        nowUnixMs: Int64
    ) -> RankingFeatures {
        let idleMs = Double(max(0, nowUnixMs - candidateProfile.lastActiveUnixMs))
        return RankingFeatures(
            sharedInterests: viewerProfile.interests.jaccard(candidateProfile.interests),
            sharedAttributes: viewerProfile.attributes.jaccard(candidateProfile.attributes),
            distanceKm: distanceKm,
            ageGapYears: viewerProfile.ageYears - candidateProfile.ageYears,
            candidateAppeal: appealOf(candidate),
            taste: taste(of: viewer)?.similarity(candidateProfile.interests) ?? 0,
            candidateActivity: pow(0.5, idleMs / settings.activityHalfLifeMs)
        )
    }

    /// What `viewer` has shown they like, with the population's taste directions (nil: no swipes yet).
    public func taste(of viewer: Int) -> TasteProfile? {
        guard let learner = learners[viewer] else { return nil }
        var taste = learner.taste
        if let projected = learner.projected, projected.version == tasteVersion {
            taste.projected = projected.lift
        } else {
            taste.project(onto: tasteBasis)
        }
        return taste
    }

    private mutating func projectTaste(_ viewer: Int) {
        guard var taste = learners[viewer]?.taste else { return }
        taste.project(onto: tasteBasis)
        learners[viewer]!.projected = taste.projected.map { ($0, tasteVersion) }
    }

    /// The population like rate plus the smoothed mean surplus of the likes `member` received (each swipe's
    /// label minus the swiper's own like rate).
    public func appealOf(_ member: Int) -> Double {
        let received = appeal[member] ?? Appeal()
        return populationLikeRate + Double(received.surplus) / (Double(received.swipes) + settings.appealPseudoSwipes)
    }

    /// The smoothed share of likes among the swipes `member` gave.
    public func likeRateOf(_ member: Int) -> Double {
        guard let learner = learners[member] else { return populationLikeRate }
        let k = settings.appealPseudoSwipes
        return (learner.taste.likeCount + k * populationLikeRate) / (learner.taste.swipeCount + k)
    }

    /// The weights of `viewer`'s model (the population prior for a viewer without swipes).
    public mutating func weights(of viewer: Int) -> SIMD8<Double> {
        guard var learner = learners[viewer] else { return populationWeights }
        if let cached = learner.cached, cached.version == populationVersion { return cached.weights }
        let weights = learner.statistics.weights(prior: populationWeights, lambdas: userLambdas)
        learner.cached = (weights, populationVersion)
        learners[viewer] = learner
        return weights
    }

    /// The weights without caching (for callers holding the recommender immutably).
    public func currentWeights(of viewer: Int) -> SIMD8<Double> {
        guard let learner = learners[viewer] else { return populationWeights }
        if let cached = learner.cached, cached.version == populationVersion { return cached.weights }
        return learner.statistics.weights(prior: populationWeights, lambdas: userLambdas)
    }

    /// Per-feature ridge strengths of a user's model: `interceptLambda` for the intercept, `userLambda` else.
    private var userLambdas: SIMD8<Double> {
        var lambdas = SIMD8<Double>(repeating: settings.userLambda)
        lambdas[0] = settings.interceptLambda
        return lambdas
    }

    /// P(like) under `weights`, clamped to 0.001…0.999 (the linear model can leave 0…1).
    public static func likeProbability(_ weights: SIMD8<Double>, _ features: RankingFeatures) -> Double {
        min(0.999, max(0.001, (weights * features.values).sum()))
    }

    /// Learns from one swipe: the viewer's model and taste, the candidate's appeal, the population prior.
    public mutating func recordSwipe(
        viewer: Int,
        candidate: Int,
        candidateInterests: InterestSet,
        features: RankingFeatures,
        liked: Bool
    ) {
        let surplus = (liked ? 1 : 0) - likeRateOf(viewer)
        // In place (no copy of the learner's statistics per swipe).
        learners[viewer, default: Learner()].statistics.observe(features, label: liked ? 1 : 0)
        learners[viewer]!.taste.record(candidateInterests, liked: liked)
        learners[viewer]!.cached = nil
        projectTaste(viewer)

        appeal[candidate, default: Appeal()].swipes += 1
        appeal[candidate]!.surplus += Float(surplus)

        population.observe(features, label: liked ? 1 : 0)
        if liked { populationLikes += 1 }
        swipesSinceRefresh += 1
        if swipesSinceRefresh >= settings.populationRefreshSwipes { solvePopulation() }
        swipesSinceTasteRefresh += 1
        if swipesSinceTasteRefresh >= max(settings.tasteRefreshSwipes, learners.count) { refreshTaste() }
    }

    /// Unlearns an undone pass (SwipeUndone).
    public mutating func forgetSwipe(
        viewer: Int,
        candidate: Int,
        candidateInterests: InterestSet,
        features: RankingFeatures,
        liked: Bool
    ) {
        guard var learner = learners[viewer] else { return }
        learner.statistics.forget(features, label: liked ? 1 : 0)
        learner.taste.forget(candidateInterests, liked: liked)
        learner.cached = nil
        learners[viewer] = learner
        projectTaste(viewer)
        if var received = appeal[candidate], received.swipes > 0 {
            // Approximately: the swiper's like rate may have moved since.
            received.swipes -= 1
            received.surplus -= Float((liked ? 1 : 0) - likeRateOf(viewer))
            appeal[candidate] = received
        }
        population.forget(features, label: liked ? 1 : 0)
        if liked { populationLikes -= 1 }
    }

    /// Forgets everything about a member (account deletion).
    public mutating func erase(_ member: Int) {
        learners[member] = nil
        appeal[member] = nil
    }

    /// Re-solves the population prior and re-estimates the taste directions now (done automatically every
    /// `populationRefreshSwipes` and `tasteRefreshSwipes` swipes).
    public mutating func refreshPopulation() {
        solvePopulation()
        refreshTaste()
    }

    /// Re-estimates the shared taste directions from (a sample of) the swipers' taste profiles.
    public mutating func refreshTaste() {
        tasteBasis = TasteProfile.basis(
            of: learners.values.lazy.prefix(settings.tasteSampleSwipers).map(\.taste.lift),
            components: settings.tasteComponents)
        tasteVersion += 1
        swipesSinceTasteRefresh = 0
        for viewer in learners.keys { projectTaste(viewer) }
    }

    private mutating func solvePopulation() {
        populationWeights = population.weights(prior: Self.initialPrior, lambda: settings.populationLambda)
        populationVersion += 1
        swipesSinceRefresh = 0
    }

    /// Whether `member` has a model of their own (has swiped).
    public func hasModel(_ member: Int) -> Bool { learners[member] != nil }
}
