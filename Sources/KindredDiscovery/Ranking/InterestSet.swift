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
