import Foundation
import KindredDiscovery

/// How a deck is ordered in the simulation.
public enum DeckPolicy: String, CaseIterable, Sendable {
    /// Random order: the floor.
    case random
    /// Nearest first (coarse km), random among equals: what a deck without a model does.
    case distance
    /// P(viewer likes candidate) from the viewer's model only.
    case likeOnly = "like-only"
    /// P(viewer likes) × P(candidate likes viewer back): Kindred's ranking.
    case reciprocal
    /// The true match probability from the latent model: the ceiling no learner can pass.
    case oracle
}

/// The results of one quality run.
public struct QualityReport: Sendable {
    public var members: Int
    public var warmupSwipes: Int
    public var heldOutSwipes: Int
    /// AUC of the learned P(like) on held-out swipes, and of the true probability on the same swipes.
    public var modelAUC: Double
    public var ceilingAUC: Double
    /// Share of the ceiling's lift over 0.5 that the model reaches: (model − 0.5) / (ceiling − 0.5).
    public var liftShare: Double { (modelAUC - 0.5) / (ceilingAUC - 0.5) }
    /// Matches per 100 swipes in the evaluation rounds, per policy.
    public var matchesPer100: [DeckPolicy: Double]
    public var evaluationSwipes: [DeckPolicy: Int]
}

/// Runs the offline quality measurement of DESIGN §4 / issue 12:
/// 1. warm-up: every member swipes `warmupSwipes` random compatible candidates (their choices drawn from the
///    latent model); 20 % of those swipes are held out, the recommender learns from the rest in order;
/// 2. AUC of the learned like prediction on the held-out swipes vs the latent model's AUC (the ceiling);
/// 3. from the same warm-up state, each policy runs `rounds` rounds in which every member active that round
///    swipes a deck of `deckSize`; the recommender keeps learning; matches per 100 swipes are counted. As in the
///    service, a deck is drawn from a pool: the `pool` nearest compatible unseen members (minus anyone who passed
///    on the viewer), then ordered by the policy (nil: everyone within the radius, the first harness's decks).
public struct QualitySimulation: Sendable {
    public var population: Population
    public var warmupSwipes = 40
    public var rounds = 12
    public var deckSize = 10
    /// The service's pool (`DiscoveryConfiguration.deckPool`); nil: rank everyone within the radius.
    public var pool: Int? = 500
    public var settings = RecommenderSettings()
    /// Tuning mode: the test swipes (the held-out 20 %) are set aside unseen, another 20 % of the training
    /// swipes is held out as a validation split, the AUC is measured on it and the policy rounds are skipped.
    /// Settings are chosen on this split, never on the test split.
    public var validation = false

    public init(population: Population) {
        self.population = population
    }

    /// State shared by the phases: who swiped whom, likes, the learner.
    struct State: Sendable {
        var swiped: [Set<Int32>]
        var liked: [Set<Int32>]
        var recommender: Recommender
        var matches = 0
        var swipes = 0
    }

    public func run() -> QualityReport {
        let members = population.members
        var random = SeededRandom(seed: population.spec.seed &+ 7)
        var recommender = Recommender(settings: settings)
        recommender.reserve(members.count - 1)
        // The taste directions from the members' interests, as the service estimates them from its index.
        recommender.refreshTasteBasis(from: members.map(\.profile.interests))
        var state = State(
            swiped: Array(repeating: [], count: members.count),
            liked: Array(repeating: [], count: members.count),
            recommender: recommender
        )
        // 1. Warm-up swipes in random order of (member, round).
        var warmup: [(viewer: Int, candidate: Candidate, liked: Bool)] = []
        for _ in 0..<warmupSwipes {
            for viewer in members.indices.shuffled(using: &random) {
                let pool = population.candidates[viewer]
                guard !pool.isEmpty else { continue }
                for _ in 0..<4 {
                    let pick = pool[Int.random(in: 0..<pool.count, using: &random)]
                    guard !state.swiped[viewer].contains(pick.member) else { continue }
                    let p = population.trueLikeProbability(viewer, pick.index, distanceKm: pick.km)
                    let liked = Double.random(in: 0..<1, using: &random) < p
                    state.swiped[viewer].insert(pick.member)
                    if liked { state.liked[viewer].insert(pick.member) }
                    warmup.append((viewer, pick, liked))
                    break
                }
            }
        }
        var heldOut = Set((0..<warmup.count).filter { _ in Double.random(in: 0..<1, using: &random) < 0.2 })
        if validation {
            // Drop the test swipes altogether; hold out validation swipes from the training ones instead.
            var validationRandom = SeededRandom(seed: population.spec.seed &+ 13)
            let training = (0..<warmup.count).filter { !heldOut.contains($0) }
            warmup = training.map { warmup[$0] }
            heldOut = Set((0..<warmup.count).filter { _ in Double.random(in: 0..<1, using: &validationRandom) < 0.2 })
        }
        for (index, swipe) in warmup.enumerated() where !heldOut.contains(index) {
            learn(&state.recommender, swipe.viewer, swipe.candidate, swipe.liked)
        }
        state.recommender.refreshPopulation()
        // 2. AUC on the held-out swipes.
        var modelScores: [Double] = []
        var trueScores: [Double] = []
        var labels: [Bool] = []
        for index in heldOut.sorted() {
            let swipe = warmup[index]
            let features = featuresOf(state.recommender, swipe.viewer, swipe.candidate)
            modelScores.append(state.recommender.likeProbability(viewer: swipe.viewer, features))
            trueScores.append(population.trueLikeProbability(swipe.viewer, swipe.candidate.index, distanceKm: swipe.candidate.km))
            labels.append(swipe.liked)
        }
        // The held-out swipes happened: learn them before the evaluation rounds (every policy starts equal).
        for index in heldOut.sorted() {
            let swipe = warmup[index]
            learn(&state.recommender, swipe.viewer, swipe.candidate, swipe.liked)
        }
        state.recommender.refreshPopulation()

        // 3. Policies from the same state and the same random stream.
        var matchesPer100: [DeckPolicy: Double] = [:]
        var evaluationSwipes: [DeckPolicy: Int] = [:]
        for policy in DeckPolicy.allCases where !validation {
            var run = state
            run.matches = 0
            run.swipes = 0
            var policyRandom = SeededRandom(seed: population.spec.seed &+ 99)
            for _ in 0..<rounds {
                for viewer in members.indices.shuffled(using: &policyRandom) {
                    guard Double.random(in: 0..<1, using: &policyRandom) < members[viewer].activity else { continue }
                    let deck = self.deck(for: viewer, policy: policy, state: run, random: &policyRandom)
                    for pick in deck {
                        let p = population.trueLikeProbability(viewer, pick.index, distanceKm: pick.km)
                        let liked = Double.random(in: 0..<1, using: &policyRandom) < p
                        run.swiped[viewer].insert(pick.member)
                        run.swipes += 1
                        if liked {
                            run.liked[viewer].insert(pick.member)
                            if run.liked[pick.index].contains(Int32(viewer)) { run.matches += 1 }
                        }
                        learn(&run.recommender, viewer, pick, liked)
                    }
                }
            }
            matchesPer100[policy] = run.swipes == 0 ? 0 : 100 * Double(run.matches) / Double(run.swipes)
            evaluationSwipes[policy] = run.swipes
        }
        return QualityReport(
            members: members.count,
            warmupSwipes: warmup.count - heldOut.count,
            heldOutSwipes: heldOut.count,
            modelAUC: areaUnderROC(scores: modelScores, labels: labels) ?? 0.5,
            ceilingAUC: areaUnderROC(scores: trueScores, labels: labels) ?? 0.5,
            matchesPer100: matchesPer100,
            evaluationSwipes: evaluationSwipes
        )
    }

    private func featuresOf(_ recommender: Recommender, _ viewer: Int, _ candidate: Candidate) -> RankingFeatures {
        recommender.features(
            viewer: viewer,
            population.members[viewer].profile,
            candidate: candidate.index,
            population.members[candidate.index].profile,
            distanceKm: candidate.km,
            nowUnixMs: 0
        )
    }

    private func learn(_ recommender: inout Recommender, _ viewer: Int, _ candidate: Candidate, _ liked: Bool) {
        let features = featuresOf(recommender, viewer, candidate)
        recommender.recordSwipe(
            viewer: viewer,
            candidate: candidate.index,
            candidateInterests: population.members[candidate.index].profile.interests,
            features: features,
            liked: liked
        )
    }

    /// The scorer of the service's ranking (`CommunityIndex.rank`) for `viewer` (every member active now).
    func scorer(_ recommender: Recommender, viewer: Int) -> MatchScorer {
        let profile = population.members[viewer].profile
        return recommender.scorer(
            viewer: recommender.state(of: viewer), interests: profile.interests, attributes: profile.attributes,
            ageYears: profile.ageYears, activity: 1)
    }

    /// The reciprocal policy's score: the service's.
    func reciprocalScore(_ scorer: MatchScorer, _ recommender: Recommender, _ candidate: Candidate, likedViewer: Bool) -> Float {
        let profile = population.members[candidate.index].profile
        return scorer.score(
            recommender.state(of: candidate.index), interests: profile.interests, attributes: profile.attributes,
            ageYears: profile.ageYears, activity: 1, distanceKm: candidate.km, likedViewer: likedViewer)
    }

    private func deck(for viewer: Int, policy: DeckPolicy, state: State, random: inout SeededRandom) -> [Candidate] {
        // The pool: the nearest unseen candidates, minus anyone who passed on the viewer (the deck rule of DESIGN
        // §4), as the service's candidate walk draws it.
        let me = Int32(viewer)
        var unseen: [Candidate] = []
        unseen.reserveCapacity(pool ?? population.candidates[viewer].count)
        for pick in population.candidates[viewer] {
            if state.swiped[viewer].contains(pick.member) { continue }
            if state.swiped[pick.index].contains(me) && !state.liked[pick.index].contains(me) { continue }
            unseen.append(pick)
            if let pool, unseen.count >= pool { break }
        }
        var scored: [(score: Double, tie: UInt64, pick: Candidate)] = []
        scored.reserveCapacity(unseen.count)
        let scorer = policy == .reciprocal ? self.scorer(state.recommender, viewer: viewer) : nil
        for pick in unseen {
            let score: Double
            switch policy {
            case .random:
                score = 0
            case .distance:
                score = -Double(pick.distanceKm)
            case .likeOnly:
                score = state.recommender.likeProbability(viewer: viewer, featuresOf(state.recommender, viewer, pick))
            case .reciprocal:
                score = Double(reciprocalScore(scorer!, state.recommender, pick, likedViewer: state.liked[pick.index].contains(me)))
            case .oracle:
                let forward = population.trueLikeProbability(viewer, pick.index, distanceKm: pick.km)
                let back = state.liked[pick.index].contains(me)
                    ? 1 : population.trueLikeProbability(pick.index, viewer, distanceKm: pick.km)
                score = forward * back
            }
            scored.append((score, random.next(), pick))
        }
        scored.sort { $0.score != $1.score ? $0.score > $1.score : $0.tie < $1.tie }
        return scored.prefix(deckSize).map(\.pick)
    }
}
