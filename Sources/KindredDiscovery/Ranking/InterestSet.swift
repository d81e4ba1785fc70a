/// A set of one-word interests (or attribute values) folded into 64 bits for the hot path: each normalised
/// word sets one bit chosen by a stable hash. Two people sharing a word always share its bit; two different
/// words share a bit with probability 1/64, which blurs the Jaccard similarity a little and costs nothing
/// else — no strings are touched while a deck is ranked.
public struct InterestSet: Sendable, Hashable {
    public var bits: UInt64

    public init(bits: UInt64 = 0) {
        self.bits = bits
    }

    /// Folds words (already normalised by the profile service: lower-case, trimmed) into bits.
    public init(words: some Sequence<String>) {
        var bits: UInt64 = 0
        for word in words { bits |= 1 << (Self.stableHash(word) & 63) }
        self.bits = bits
    }

    public var count: Int { bits.nonzeroBitCount }

    /// |A ∩ B| / |A ∪ B|, 0 when both are empty.
    public func jaccard(_ other: InterestSet) -> Double {
        let union = (bits | other.bits).nonzeroBitCount
        return union == 0 ? 0 : Double((bits & other.bits).nonzeroBitCount) / Double(union)
    }

    /// FNV-1a over the UTF-8 bytes: stable across processes and releases (Swift's `Hasher` is seeded per
    /// process, so it cannot be stored or compared between replicas).
    public static func stableHash(_ word: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in word.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }
}

/// What a viewer has shown they like, per interest bit: how often they liked candidates having it compared
/// with how often they like anyone. The taste feature is the mean of that lift over a candidate's bits (a
/// naive-Bayes-like score), so the model learns taste that shared interests do not capture (people who like
/// hikers without being hikers). 512 bytes per viewer who has swiped.
public struct TasteProfile: Sendable, Equatable {
    private(set) var likes: SIMD64<Float> = .zero
    private(set) var swipes: SIMD64<Float> = .zero
    private(set) var totalLikes: Float = 0
    private(set) var totalSwipes: Float = 0

    /// Pseudo-swipes per bit: a bit seen once says little.
    static let smoothing: Float = 3

    public init() {}

    /// Likes and swipes the viewer gave (any interests).
    public var likeCount: Double { Double(totalLikes) }
    public var swipeCount: Double { Double(totalSwipes) }

    public mutating func record(_ interests: InterestSet, liked: Bool) {
        add(interests, liked: liked, sign: 1)
    }

    public mutating func forget(_ interests: InterestSet, liked: Bool) {
        add(interests, liked: liked, sign: -1)
    }

    private mutating func add(_ interests: InterestSet, liked: Bool, sign: Float) {
        totalSwipes += sign
        if liked { totalLikes += sign }
        var bits = interests.bits
        while bits != 0 {
            let bit = bits.trailingZeroBitCount
            swipes[bit] += sign
            if liked { likes[bit] += sign }
            bits &= bits - 1
        }
    }

    /// Mean over the candidate's bits of (smoothed like rate with the bit − overall like rate), about −1…1;
    /// 0 for a viewer without swipes or a candidate without interests.
    public func similarity(_ interests: InterestSet) -> Double {
        guard totalSwipes > 0, interests.bits != 0 else { return 0 }
        let rate = totalLikes / totalSwipes
        var lift: Float = 0
        var bits = interests.bits
        while bits != 0 {
            let bit = bits.trailingZeroBitCount
            lift += (likes[bit] + Self.smoothing * rate) / (swipes[bit] + Self.smoothing) - rate
            bits &= bits - 1
        }
        return Double(lift) / Double(interests.count)
    }
}
