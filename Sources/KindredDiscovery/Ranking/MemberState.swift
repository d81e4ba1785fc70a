/// Everything the model keeps about one member, swiper or not: 32 bytes in one dense array per community
/// (no per-member heap object, dictionary entry or cached solution). Every field is a sum over swipes, so a
/// swipe updates it in O(1) and an undo subtracts it again.
public struct MemberState: Sendable, Equatable {
    /// Σ over the swipes the member gave of (label − their like rate then) × the candidate's taste coordinates
    /// (`TasteBasis`): which way their likes lean. Divided by swipes + `tastePseudoSwipes` it is their taste.
    public var taste: SIMD4<Float> = .zero
    /// Likes and swipes the member gave: their own like rate (how choosy they are, the per-user intercept).
    public var likesGiven: Float = 0
    public var swipesGiven: Float = 0
    /// Swipes the member received, and Σ (label − each swiper's like rate): their appeal.
    public var swipesReceived: Float = 0
    public var surplusReceived: Float = 0

    public init() {}

    public var isEmpty: Bool { self == MemberState() }
}
