import Foundation

/// The learning part of discovery (DESIGN §4), on the logit scale:
///
///     logit P(v likes c) = w · x(v, c) + offset(v)
///
/// where `w` are population slopes every member shares (refitted by IRLS on a uniform sample of swipes),
/// `x` the `RankingFeatures` (shared interests and attributes, closeness, age gap, the candidate's appeal, the
/// viewer's taste for where the candidate sits, the candidate's activity), and `offset(v)` the viewer's own
/// choosiness: the logit of their smoothed like rate minus the population's. What differs between people is
/// kept per member in `MemberState` (32 bytes): like and swipe counts (the intercept), appeal, and 4 taste
/// coordinates — the harness's validation split found per-user slopes barely move from the population's, so
/// none are kept. Every swipe event updates the viewer's and the candidate's state at once; the population
/// slopes follow every `populationRefreshSwipes` swipes.
///
/// The deck's score is the match probability, P(viewer likes candidate) × P(candidate likes viewer), where the
/// second factor is the same model from the candidate's side, with the candidate's choosiness and taste (the
/// reciprocal term of RECON-style recommenders). Members are dense integers (the index's slots).
/// Not thread-safe: its owner serialises writes.
public struct Recommender: Sendable {
    public var settings: RecommenderSettings
    public private(set) var states: [MemberState] = []
    public private(set) var basis = TasteBasis()
    /// The population slopes (logit scale).
    public private(set) var weights: SIMD8<Double>
    private var sample: [Sample] = []
    private var sampleOffered: UInt64 = 0
    private var totalSwipes: Double = 0
    private var totalLikes: Double = 0
    private var swipesSinceRefresh = 0

    struct Sample: Sendable {
        var features: SIMD8<Float>
        var offset: Float
        var label: Float
    }

    /// The slopes before any swipe (logit scale): shared interests, closeness, appeal and taste up, age gap down.
    public static let initialPrior = SIMD8<Double>(-0.85, 1, 0.5, 0.5, -0.5, 1, 1, 0.3)

    public init(settings: RecommenderSettings = RecommenderSettings()) {
        self.settings = settings
        self.weights = Self.initialPrior
    }

    /// The swipes the model has learned from.
    public var swipeCount: Int { Int(totalSwipes) }

    /// Share of likes among all swipes seen (0.3 before any).
    public var populationLikeRate: Double {
        totalSwipes < 1 ? 0.3 : min(0.99, max(0.01, totalLikes / totalSwipes))
    }

    // MARK: Per-member state

    /// Makes room for `member` (new members start empty).
    public mutating func reserve(_ member: Int) {
        if states.count <= member { states.append(contentsOf: repeatElement(MemberState(), count: member + 1 - states.count)) }
    }

    public func state(of member: Int) -> MemberState {
        member >= 0 && member < states.count ? states[member] : MemberState()
    }

    public mutating func setState(_ state: MemberState, of member: Int) {
        reserve(member)
        states[member] = state
    }

    /// Forgets everything about a member (account deletion, or a slot given to someone else).
    public mutating func erase(_ member: Int) {
        if member < states.count { states[member] = MemberState() }
    }

    /// Moves every member's state to its new number (`newNumber[old]`, -1 for a number nobody holds).
    public mutating func renumber(_ newNumber: [Int32]) {
        var moved = [MemberState](repeating: MemberState(), count: newNumber.reduce(0) { max($0, Int($1) + 1) })
        for (old, new) in newNumber.enumerated() where new >= 0 && old < self.states.count {
            moved[Int(new)] = self.states[old]
        }
        self.states = moved
    }

    /// Whether `member` has swiped.
    public func hasModel(_ member: Int) -> Bool { state(of: member).swipesGiven > 0 }

    /// The member's smoothed like rate.
    public func likeRate(_ state: MemberState) -> Double {
        let k = settings.interceptPseudoSwipes
        return (Double(state.likesGiven) + k * populationLikeRate) / (Double(state.swipesGiven) + k)
    }

    /// The member's choosiness on the logit scale, relative to the population (0 before their first swipe).
    public func offset(_ state: MemberState) -> Double {
        state.swipesGiven == 0 ? 0 : Self.logit(likeRate(state)) - Self.logit(populationLikeRate)
    }

    /// The appeal feature: the logit of the smoothed share of likes the member received beyond each swiper's
    /// own like rate, relative to the population's (0 before anyone swiped on them).
    public func appeal(_ state: MemberState) -> Double {
        let rate = populationLikeRate
        let shifted = rate + Double(state.surplusReceived) / (Double(state.swipesReceived) + settings.appealPseudoSwipes)
        return Self.logit(min(0.99, max(0.01, shifted))) - Self.logit(rate)
    }

    public func appealOf(_ member: Int) -> Double { appeal(state(of: member)) }

    /// The member's taste: their taste sum per swipe (smoothed).
    public func taste(_ state: MemberState) -> SIMD4<Float> {
        state.taste / Float(Double(state.swipesGiven) + settings.tastePseudoSwipes)
    }

    /// The taste feature of `viewer` for a candidate with `interests`.
    public func tasteFeature(_ viewer: MemberState, _ interests: InterestSet) -> Double {
        Double((taste(viewer) * basis.coordinates(of: interests)).sum())
    }

    // MARK: Features and prediction

    /// The features of `viewer` looking at `candidate`.
    public func features(
        viewer: Int,
        _ viewerProfile: RankingProfile,
        candidate: Int,
        _ candidateProfile: RankingProfile,
        distanceKm: Int,
        nowUnixMs: Int64
    ) -> RankingFeatures {
        features(
            viewer: state(of: viewer), viewerProfile, candidate: state(of: candidate), candidateProfile,
            distanceKm: distanceKm, nowUnixMs: nowUnixMs)
    }

    public func features(
        viewer: MemberState,
        _ viewerProfile: RankingProfile,
        candidate: MemberState,
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
            candidateAppeal: appeal(candidate),
            taste: tasteFeature(viewer, candidateProfile.interests),
            candidateActivity: pow(0.5, idleMs / settings.activityHalfLifeMs)
        )
    }

    /// P(`viewer` likes) for these features.
    public func likeProbability(viewer: Int, _ features: RankingFeatures) -> Double {
        Self.logistic((weights * features.values).sum() + offset(state(of: viewer)))
    }

    @inline(__always)
    public static func logistic(_ x: Double) -> Double { 1 / (1 + exp(-x)) }

    @inline(__always)
    static func logit(_ p: Double) -> Double { log(p / (1 - p)) }

    // MARK: Learning

    /// Learns from one swipe (features as computed when it happened, and stored with it).
    public mutating func recordSwipe(
        viewer: Int,
        candidate: Int,
        candidateInterests: InterestSet,
        features: RankingFeatures,
        liked: Bool
    ) {
        reserve(max(viewer, candidate))
        var (v, c) = (states[viewer], states[candidate])
        record(viewer: &v, candidate: &c, candidateInterests: candidateInterests, features: features, liked: liked)
        states[viewer] = v
        states[candidate] = c
    }

    /// Learns from one swipe between members whose state the caller holds (e.g. one not in the index).
    public mutating func record(
        viewer v: inout MemberState,
        candidate c: inout MemberState,
        candidateInterests: InterestSet,
        features: RankingFeatures,
        liked: Bool
    ) {
        let label: Double = liked ? 1 : 0
        let rate = likeRate(v)
        offerSample(Sample(features: SIMD8<Float>(features.values), offset: Float(offset(v)), label: Float(label)))
        v.taste += Float(label - rate) * basis.coordinates(of: candidateInterests)
        v.likesGiven += Float(label)
        v.swipesGiven += 1
        c.swipesReceived += 1
        c.surplusReceived += Float(label - rate)
        totalSwipes += 1
        totalLikes += label
        swipesSinceRefresh += 1
        if swipesSinceRefresh >= max(settings.populationRefreshSwipes, sample.count / 4) { fitPopulation(iterations: 1) }
    }

    /// Unlearns an undone swipe (SwipeUndone). Exact for the counts; the taste and appeal sums are reduced with
    /// the viewer's like rate after the removal, which is the rate the swipe was learnt with when it is undone
    /// before the viewer's next swipe (the usual undo). The swipe stays in the population's sample if it was
    /// drawn into it (one of ≥ 65,536; the slopes are a population average).
    public mutating func forgetSwipe(
        viewer: Int,
        candidate: Int,
        candidateInterests: InterestSet,
        features: RankingFeatures,
        liked: Bool
    ) {
        guard viewer < states.count, candidate < states.count else { return }
        var (v, c) = (states[viewer], states[candidate])
        forget(viewer: &v, candidate: &c, candidateInterests: candidateInterests, liked: liked)
        states[viewer] = v
        states[candidate] = c
    }

    public mutating func forget(
        viewer v: inout MemberState, candidate c: inout MemberState, candidateInterests: InterestSet, liked: Bool
    ) {
        guard v.swipesGiven >= 1 else { return }
        let label: Double = liked ? 1 : 0
        v.likesGiven = max(0, v.likesGiven - Float(label))
        v.swipesGiven -= 1
        totalSwipes = max(0, totalSwipes - 1)
        totalLikes = max(0, totalLikes - label)
        let rate = likeRate(v)
        v.taste -= Float(label - rate) * basis.coordinates(of: candidateInterests)
        if v.swipesGiven == 0 { v.taste = .zero }
        if c.swipesReceived >= 1 {
            c.swipesReceived -= 1
            c.surplusReceived -= Float(label - rate)
            if c.swipesReceived == 0 { c.surplusReceived = 0 }
        }
    }

    /// Refits the population slopes to convergence now (they otherwise take one IRLS step every
    /// `populationRefreshSwipes` swipes).
    public mutating func refreshPopulation() {
        fitPopulation(iterations: 8)
    }

    /// Re-estimates the taste directions from members' interests (a sample of at most `tasteSampleMembers`),
    /// carrying every member's taste over to the new directions (`TasteBasis.transfer`).
    public mutating func refreshTasteBasis(from interests: some Collection<InterestSet>) {
        let step = max(1, interests.count / max(1, settings.tasteSampleMembers))
        var sampled: [InterestSet] = []
        var index = interests.startIndex
        var position = 0
        while index != interests.endIndex {
            if position % step == 0 { sampled.append(interests[index]) }
            position += 1
            index = interests.index(after: index)
        }
        setTasteBasis(TasteBasis(interests: sampled, components: settings.tasteComponents))
    }

    public mutating func setTasteBasis(_ new: TasteBasis) {
        let transfer = new.transfer(from: basis)
        for member in states.indices where states[member].taste != .zero {
            states[member].taste = transfer(states[member].taste)
        }
        basis = new
    }

    /// Reservoir sampling (Vitter's algorithm R) with a deterministic stream: the same swipes in the same order
    /// give the same sample, so a rebuild replays the population model exactly.
    private mutating func offerSample(_ entry: Sample) {
        defer { sampleOffered &+= 1 }
        if sample.count < settings.populationSampleSwipes {
            sample.append(entry)
            return
        }
        var z = (sampleOffered &+ 1) &* 0x9e37_79b9_7f4a_7c15
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        z ^= z >> 31
        let slot = Int(z % (sampleOffered &+ 1))
        if slot < sample.count { sample[slot] = entry }
    }

    /// Iteratively reweighted least squares for the logistic population model with each swipe's viewer offset,
    /// ridge towards `initialPrior`.
    private mutating func fitPopulation(iterations: Int) {
        swipesSinceRefresh = 0
        guard !sample.isEmpty else { return }
        for _ in 0..<iterations {
            var statistics = RidgeStatistics()
            let w = SIMD8<Float>(weights)
            for entry in sample {
                let linear = (w * entry.features).sum()
                let p = min(1 - 1e-4, max(1e-4, 1 / (1 + exp(-(linear + entry.offset)))))
                let variance = p * (1 - p)
                let response = linear + (entry.label - p) / variance
                statistics.observe(RankingFeatures(SIMD8<Double>(entry.features)), label: Double(response), weight: Double(variance))
            }
            weights = statistics.weights(prior: Self.initialPrior, lambda: settings.populationLambda)
        }
    }

    // MARK: Ranking

    /// What ranking a deck needs, computed once per deck: the population slopes in Float, the viewer's own terms
    /// (their offset, taste and where they sit for the forward side; their appeal, activity and choosiness for
    /// the candidates' side).
    public func scorer(
        viewer: MemberState, interests: InterestSet, attributes: InterestSet, ageYears: Int, activity: Float
    ) -> MatchScorer {
        MatchScorer(
            weights: SIMD8<Float>(weights), basis: basis, populationLogit: Float(Self.logit(populationLikeRate)),
            populationRate: Float(populationLikeRate), interceptPseudoSwipes: Float(settings.interceptPseudoSwipes),
            appealPseudoSwipes: Float(settings.appealPseudoSwipes), tastePseudoSwipes: Float(settings.tastePseudoSwipes),
            viewerInterests: interests, viewerAttributes: attributes, viewerAge: ageYears,
            viewerOffset: Float(offset(viewer)), viewerTaste: taste(viewer),
            viewerCoordinates: basis.coordinates(of: interests), viewerAppeal: Float(appeal(viewer)),
            viewerActivity: activity)
    }
}
