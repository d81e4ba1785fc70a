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
