import Foundation

/// The model state the index keeps per member for ranking: the solved weights of the member's own like model
/// (used for the reciprocal term when the member is a candidate) and their appeal. 36 bytes per member;
/// the full sufficient statistics live in the `Recommender` (and in PostgreSQL), only for people who swipe.
public struct MemberModel: Sendable, Equatable {
    public var weights: SIMD8<Float>
    public var appeal: Float
    /// False for a member without swipes of their own: the ranking then uses the current population weights
    /// (passed to `rank`), so a population refresh needs no pass over every member.
    public var ownWeights: Bool

    public init(weights: SIMD8<Float>, appeal: Float, ownWeights: Bool = true) {
        self.weights = weights
        self.appeal = appeal
        self.ownWeights = ownWeights
    }

    public static let prior = MemberModel(weights: SIMD8<Float>(Recommender.initialPrior), appeal: 0.3, ownWeights: false)
}

/// A ranked deck entry.
public struct RankedCandidate: Sendable, Equatable {
    public var match: IndexMatch
    /// P(viewer likes) × P(candidate likes back), 0…1.
    public var score: Float
}

extension CommunityIndex {
    /// Ranks a candidate pool for `viewer` by match likelihood: the viewer's model on (viewer → candidate)
    /// features times the candidate's own model on (candidate → viewer) features (the reciprocal term; the
    /// `population` weights for candidates without a model of their own, when given).
    /// Ties (equal scores) go to the more recently active, then the newer member, then the smaller user id —
    /// the documented freshness tie-breakers.
    public func rank(
        _ pool: [IndexMatch],
        viewer: UserKey,
        viewerWeights: SIMD8<Double>,
        taste: TasteProfile?,
        models: [MemberModel],
        population: SIMD8<Float>? = nil,
        nowMinutes: Int32
    ) -> [RankedCandidate] {
        guard let v = slot(of: viewer) else { return [] }
        let vi = Int(v)
        let viewerModel = Int(v) < models.count ? models[vi] : .prior
        let viewerInterests = interests[vi]
        let viewerAttributes = attributes[vi]
        let weights = SIMD8<Float>(viewerWeights)
        var ranked: [RankedCandidate] = []
        ranked.reserveCapacity(pool.count)
        for match in pool {
            let ci = Int(match.slot)
            let candidate = ci < models.count ? models[ci] : .prior
            let shared = Float(viewerInterests.jaccard(interests[ci]))
            let sharedAttributes = Float(viewerAttributes.jaccard(attributes[ci]))
            let closeness = Self.closeness[min(match.distanceKm, 500)]
            let ageGap = Float(min(abs(Int(birthYear(vi)) - Int(birthYear(ci))), 20)) / 20
            let forward = SIMD8<Float>(
                1, shared, sharedAttributes, closeness, ageGap, candidate.appeal,
                Float(taste?.similarity(interests[ci]) ?? 0), Self.activity(lastActive[ci], nowMinutes)
            )
            // The candidate looking at the viewer: same symmetric features, the viewer's appeal and activity,
            // no taste (the candidate's taste profile is not kept in memory for every member).
            let backward = SIMD8<Float>(
                1, shared, sharedAttributes, closeness, ageGap, viewerModel.appeal, 0,
                Self.activity(lastActive[vi], nowMinutes)
            )
            let pForward = min(0.999, max(0.001, (weights * forward).sum()))
            let candidateWeights = candidate.ownWeights ? candidate.weights : (population ?? candidate.weights)
            let pBack = min(0.999, max(0.001, (candidateWeights * backward).sum()))
            ranked.append(RankedCandidate(match: match, score: pForward * pBack))
        }
        ranked.sort { a, b in
            if a.score != b.score { return a.score > b.score }
            let (x, y) = (Int(a.match.slot), Int(b.match.slot))
            if lastActive[x] != lastActive[y] { return lastActive[x] > lastActive[y] }
            if joined[x] != joined[y] { return joined[x] > joined[y] }
            return a.match.user < b.match.user
        }
        return ranked
    }

    /// 1 − log₂(1 + km) / log₂(501) for 0…500 km (the closeness feature), precomputed.
    static let closeness: [Float] = (0...500).map { 1 - Float(log2(1 + Double($0)) / log2(501)) }

    /// 1 for active now, halving every 7 days.
    static func activity(_ lastActiveMinutes: Int32, _ nowMinutes: Int32) -> Float {
        let idle = Float(max(0, nowMinutes - lastActiveMinutes))
        return exp2(-idle / (7 * 24 * 60))
    }
}
