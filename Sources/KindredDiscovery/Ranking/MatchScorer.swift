import Foundation

/// Scores candidates for one viewer: P(viewer likes candidate) × P(candidate likes viewer), both from
/// `Recommender`'s model. The service's `CommunityIndex.rank` and the quality harness's reciprocal policy both
/// score through `score`, so the harness measures the service's ranking.
public struct MatchScorer: Sendable {
    let weights: SIMD8<Float>
    let basis: TasteBasis
    let populationLogit: Float
    let populationRate: Float
    let interceptPseudoSwipes: Float
    let appealPseudoSwipes: Float
    let tastePseudoSwipes: Float
    let viewerInterests: InterestSet
    let viewerAttributes: InterestSet
    let viewerAge: Int
    let viewerOffset: Float
    let viewerTaste: SIMD4<Float>
    let viewerCoordinates: SIMD4<Float>
    let viewerAppeal: Float
    let viewerActivity: Float

    /// 1 − log₂(1 + km) / log₂(501) for 0…500 km (the closeness feature), precomputed.
    static let closeness: [Float] = (0...500).map { 1 - Float(log2(1 + Double($0)) / log2(501)) }

    @inline(__always)
    static func logit(_ p: Float) -> Float { logf(p / (1 - p)) }

    /// The match score of a candidate (0…1). `likedViewer`: the candidate already liked the viewer, so the
    /// backward factor is known, 1 (a like from them is a match at once).
    @inline(__always)
    public func score(
        _ candidate: MemberState, interests: InterestSet, attributes: InterestSet, ageYears: Int, activity: Float,
        distanceKm: Int, likedViewer: Bool
    ) -> Float {
        let shared = Float(viewerInterests.jaccard(interests))
        let sharedAttributes = Float(viewerAttributes.jaccard(attributes))
        let closeness = Self.closeness[max(0, min(distanceKm, 500))]
        let ageGap = Float(min(abs(viewerAge - ageYears), 20)) / 20
        let common = weights[0] + weights[1] * shared + weights[2] * sharedAttributes + weights[3] * closeness
            + weights[4] * ageGap
        // The candidate's appeal and choosiness (the logit of smoothed rates, relative to the population's).
        let appealRate = populationRate + candidate.surplusReceived / (candidate.swipesReceived + appealPseudoSwipes)
        let appeal = Self.logit(min(0.99, max(0.01, appealRate))) - populationLogit
        let offset: Float
        let candidateTaste: SIMD4<Float>
        if candidate.swipesGiven > 0 {
            let rate = (candidate.likesGiven + interceptPseudoSwipes * populationRate) / (candidate.swipesGiven + interceptPseudoSwipes)
            offset = Self.logit(rate) - populationLogit
            candidateTaste = candidate.taste / (candidate.swipesGiven + tastePseudoSwipes)
        } else {
            offset = 0
            candidateTaste = .zero
        }
        let coordinates = basis.coordinates(of: interests)
        let forward = common + weights[5] * appeal + weights[6] * (viewerTaste * coordinates).sum()
            + weights[7] * activity + viewerOffset
        if likedViewer { return 1 / (1 + expf(-forward)) }
        let backward = common + weights[5] * viewerAppeal + weights[6] * (candidateTaste * viewerCoordinates).sum()
            + weights[7] * viewerActivity + offset
        return 1 / ((1 + expf(-forward)) * (1 + expf(-backward)))
    }
}
