/// The shared directions of taste: a few directions in the 64-bit interest space along which people's
/// interests vary together (people who hike tend to climb), estimated by principal components of the members'
/// interest sets. A member's taste is kept as 4 coordinates on these directions (`MemberState.taste`), not as
/// 64 per-bit counts: the taste feature is "how much does the viewer like people sitting where this candidate
/// sits", and a candidate's position is `coordinates(of:)` of their interests.
///
/// The directions come from profiles, not swipes, so they exist before anyone swipes and a rebuild finds them
/// before replaying the swipes. In the quality harness's population (interests drawn along 4 latent trait
/// dimensions, taste a direction in the same space) they recover the subspace the latent taste acts in.
public struct TasteBasis: Sendable, Equatable {
    /// Per interest bit, its coordinates on the directions (empty: no basis yet, every coordinate is 0).
    public private(set) var bitCoordinates: [SIMD4<Float>]
    /// The mean member's coordinates (subtracted, so coordinates are centred).
    public private(set) var centre: SIMD4<Float>
    /// The spread of the members' positions along each direction: coordinates are divided by it (whitened), so
    /// a member's taste sum weighs every direction alike instead of by how much interests vary along it.
    public private(set) var spread: SIMD4<Float>
    /// Members (with interests) the basis was estimated from.
    public private(set) var members: Int

    public init() {
        self.bitCoordinates = []
        self.centre = .zero
        self.spread = SIMD4(repeating: 1)
        self.members = 0
    }

    /// The top `components` (≤ 4) principal directions of the members' interest sets (each as the indicator of
    /// its bits divided by their count, centred); empty with fewer than 2 members with interests.
    public init(interests: some Sequence<InterestSet>, components: Int) {
        self.init()
        // The centred second moment Σ (u − μ)(u − μ)ᵀ = Σ u uᵀ − n μ μᵀ, from each set's few bits (a rebuild
        // estimates it for millions of members between two reads of one transaction: O(bits²) each, not 64²).
        var moment = [SIMD64<Double>](repeating: .zero, count: 64)
        var sum = SIMD64<Double>.zero
        var count = 0
        for set in interests where set.bits != 0 {
            let weight = 1 / Double(set.count)
            var rows = set.bits
            while rows != 0 {
                let row = rows.trailingZeroBitCount
                sum[row] += weight
                var columns = set.bits
                while columns != 0 {
                    moment[row][columns.trailingZeroBitCount] += weight * weight
                    columns &= columns - 1
                }
                rows &= rows - 1
            }
            count += 1
        }
        guard count >= 2, components > 0 else { return }
        let mean = sum / Double(count)
        for row in 0..<64 { moment[row] -= Double(count) * mean[row] * mean }
        let directions = Self.principalDirections(moment: moment, components: min(4, components))
        guard !directions.isEmpty else { return }
        var spread = SIMD4<Float>(repeating: 1)
        var coordinates = [SIMD4<Float>](repeating: .zero, count: 64)
        for (component, (direction, eigenvalue)) in directions.enumerated() {
            // The members' spread along a direction: √(eigenvalue / n).
            spread[component] = Float(max(1e-6, (eigenvalue / Double(count)).squareRoot()))
            for bit in 0..<64 { coordinates[bit][component] = Float(direction[bit]) / spread[component] }
        }
        self.spread = spread
        self.bitCoordinates = coordinates
        self.members = count
        var centre = SIMD4<Float>.zero
        for bit in 0..<64 { centre += Float(mean[bit]) * coordinates[bit] }
        self.centre = centre
    }

    public var isEmpty: Bool { bitCoordinates.isEmpty }

    /// Where a member with these interests sits on the taste directions (0 without a basis or interests).
    @inline(__always)
    public func coordinates(of interests: InterestSet) -> SIMD4<Float> {
        guard !bitCoordinates.isEmpty, interests.bits != 0 else { return .zero }
        var sum = SIMD4<Float>.zero
        var bits = interests.bits
        bitCoordinates.withUnsafeBufferPointer { table in
            while bits != 0 {
                sum += table[bits.trailingZeroBitCount]
                bits &= bits - 1
            }
        }
        return sum / Float(interests.bits.nonzeroBitCount) - centre
    }

    /// Maps coordinates on `old`'s directions to this basis's (`new · oldᵀ`): exact for the part of a taste
    /// that lies in the old directions' span, which is all a member's taste sum holds.
    public func transfer(from old: TasteBasis) -> (SIMD4<Float>) -> SIMD4<Float> {
        guard !old.isEmpty, !isEmpty else { return { _ in .zero } }
        // On unit directions: columns[j] = Σ_bit new[bit] · old[bit][j], then the spreads (whitening) undone on
        // the old side and applied on the new.
        var columns = [SIMD4<Float>](repeating: .zero, count: 4)
        for bit in 0..<64 {
            let new = bitCoordinates[bit] * spread
            let previous = old.bitCoordinates[bit] * old.spread
            for j in 0..<4 { columns[j] += new * previous[j] }
        }
        for j in 0..<4 { columns[j] = columns[j] * old.spread[j] / spread }
        let (c0, c1, c2, c3) = (columns[0], columns[1], columns[2], columns[3])
        return { v in c0 * v[0] + c1 * v[1] + c2 * v[2] + c3 * v[3] }
    }

    /// The top `components` principal directions of the vectors (uncentred second moment): power iteration
    /// with deflation on the 64×64 matrix; deterministic.
    public static func principalDirections(of vectors: some Sequence<SIMD64<Float>>, components: Int) -> [SIMD64<Float>] {
        var moment = [SIMD64<Double>](repeating: .zero, count: 64)
        for vector in vectors {
            let l = SIMD64<Double>(vector)
            for row in 0..<64 where l[row] != 0 { moment[row] += l[row] * l }
        }
        return principalDirections(moment: moment, components: components).map { SIMD64<Float>($0.vector) }
    }

    /// The top eigenvectors (and eigenvalues) of a symmetric positive semi-definite 64×64 matrix.
    static func principalDirections(moment: [SIMD64<Double>], components: Int) -> [(vector: SIMD64<Double>, eigenvalue: Double)] {
        var moment = moment
        var basis: [(vector: SIMD64<Double>, eigenvalue: Double)] = []
        for component in 0..<min(max(0, components), 64) {
            // A fixed pseudo-random start (SplitMix64): not all-ones, which is orthogonal to every centred
            // vector of shares (they sum to 0) and would find nothing.
            var vector = SIMD64<Double>.zero
            var state = UInt64(component + 1) &* 0x9e37_79b9_7f4a_7c15
            for row in 0..<64 {
                state &+= 0x9e37_79b9_7f4a_7c15
                var z = (state ^ (state >> 30)) &* 0xbf58_476d_1ce4_e5b9
                z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
                vector[row] = Double(z >> 11) / Double(1 << 53) - 0.5
            }
            var eigenvalue = 0.0
            for _ in 0..<100 {
                var next = SIMD64<Double>.zero
                for row in 0..<64 { next[row] = (moment[row] * vector).sum() }
                eigenvalue = (next * next).sum().squareRoot()
                guard eigenvalue > 1e-12 else { return basis }
                vector = next / eigenvalue
            }
            basis.append((vector, eigenvalue))
            for row in 0..<64 { moment[row] -= eigenvalue * vector[row] * vector }
        }
        return basis
    }
}
