import Foundation

/// The features of one (viewer, candidate) pair that the like model sees (a logistic model: `Recommender`).
/// Index 0 is the intercept (the population's base rate; each viewer's own choosiness is their offset).
///
/// | index | feature | why |
/// |---|---|---|
/// | 0 | 1 | the population's base rate |
/// | 1 | shared interests (Jaccard of the interest sets) | people like people like them |
/// | 2 | shared ranking attributes (fraction equal, e.g. business field) | Fusion's business-field match |
/// | 3 | closeness: 1 − log₂(1 + coarse km) / log₂(1 + 500) | nearer is likelier, with diminishing effect |
/// | 4 | age gap: min(|Δ years|, 20) / 20 | |
/// | 5 | the candidate's appeal: logit of the smoothed share of likes they received beyond each swiper's like rate, minus the population's | what everyone sees |
/// | 6 | taste: the viewer's taste (4 coordinates) · where the candidate's interests sit (`TasteBasis`) | what this viewer sees |
/// | 7 | the candidate's activity: 1 for active now, halving every 7 days | inactive people do not like back |
public struct RankingFeatures: Sendable, Equatable {
    public var values: SIMD8<Double>

    public init(_ values: SIMD8<Double>) {
        self.values = values
    }

    public init(
        sharedInterests: Double,
        sharedAttributes: Double,
        distanceKm: Int,
        ageGapYears: Int,
        candidateAppeal: Double,
        taste: Double,
        candidateActivity: Double
    ) {
        let closeness = 1 - log2(1 + Double(max(0, min(distanceKm, 500)))) / log2(501)
        let ageGap = Double(min(abs(ageGapYears), 20)) / 20
        self.values = SIMD8(
            1, sharedInterests, sharedAttributes, closeness, ageGap, candidateAppeal, taste, candidateActivity
        )
    }

    /// The names of the features, index by index (for logs and the quality report).
    public static let names = [
        "intercept", "shared_interests", "shared_attributes", "closeness", "age_gap", "appeal", "taste",
        "activity",
    ]
}
