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
    static let smoothing: Float = 12

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
        projected = nil  // stale: the owner re-projects
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

    /// The lifts projected onto a low-rank basis of taste directions learnt from many viewers
    /// (`TasteProfile.basis(of:components:)`, `project(onto:)`); when set, `similarity` uses them.
    public var projected: SIMD64<Float>?

    /// Sets `projected` to the lifts projected onto `basis` (orthonormal; empty: raw lifts are used).
    public mutating func project(onto basis: [SIMD64<Float>]) {
        guard !basis.isEmpty else {
            projected = nil
            return
        }
        let lift = self.lift
        var sum = SIMD64<Float>.zero
        for vector in basis { sum += (vector * lift).sum() * vector }
        projected = sum
    }

    /// The smoothed lift per bit: like rate with the bit − overall like rate (0 for bits never seen).
    public var lift: SIMD64<Float> {
        guard totalSwipes > 0 else { return .zero }
        let rate = totalLikes / totalSwipes
        let smoothing = SIMD64<Float>(repeating: Self.smoothing)
        return (likes + smoothing * rate) / (swipes + smoothing) - SIMD64(repeating: rate)
    }

    /// Mean over the candidate's bits of the viewer's lift, about −1…1; 0 for a viewer without swipes or a
    /// candidate without interests. With `projected` set, the lift is first projected: a viewer's few swipes
    /// touch each bit a handful of times, and tastes are few directions shared by everyone (people who like
    /// hikers tend to like climbers), so the projection keeps the taste and drops most of the noise.
    public func similarity(_ interests: InterestSet) -> Double {
        guard totalSwipes > 0, interests.bits != 0 else { return 0 }
        let lift = projected ?? self.lift
        var sum: Float = 0
        var bits = interests.bits
        while bits != 0 {
            sum += lift[bits.trailingZeroBitCount]
            bits &= bits - 1
        }
        return Double(sum) / Double(interests.count)
    }

    /// The top `components` principal directions of the given lift vectors (uncentred): the shared directions
    /// of taste. Power iteration with deflation on the 64×64 second-moment matrix; deterministic.
    public static func basis(of lifts: some Sequence<SIMD64<Float>>, components: Int) -> [SIMD64<Float>] {
        guard components > 0 else { return [] }
        var moment = [SIMD64<Double>](repeating: .zero, count: 64)
        var count = 0
        for lift in lifts {
            let l = SIMD64<Double>(lift)
            for row in 0..<64 where l[row] != 0 { moment[row] += l[row] * l }
            count += 1
        }
        guard count > 0 else { return [] }
        var basis: [SIMD64<Float>] = []
        for component in 0..<min(components, 64) {
            var vector = SIMD64<Double>(repeating: 1)
            vector[component] += 1
            var eigenvalue = 0.0
            for _ in 0..<100 {
                var next = SIMD64<Double>.zero
                for row in 0..<64 { next[row] = (moment[row] * vector).sum() }
                eigenvalue = (next * next).sum().squareRoot()
                guard eigenvalue > 1e-12 else { return basis }
                vector = next / eigenvalue
            }
            basis.append(SIMD64<Float>(vector))
            for row in 0..<64 { moment[row] -= eigenvalue * vector[row] * vector }
        }
        return basis
    }
}
