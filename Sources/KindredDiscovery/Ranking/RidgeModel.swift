/// A linear model fitted by ridge regression towards a prior, kept as sufficient statistics so that every
/// swipe updates it exactly and cheaply (DESIGN §4: "a per-user online linear model, ridge regression updated
/// on every swipe").
///
/// The weights minimise `Σ (y − w·x)² + λ ‖w − w₀‖²` over the observed swipes (`y` = 1 for a like, 0 for a
/// pass), which is the solution of `(XᵀX + λI) w = Xᵀy + λ w₀`. With no observations the weights equal the
/// prior `w₀` (the population model for a new user); each observation moves them towards the user's own
/// behaviour, and λ says how many swipes it takes to outweigh the prior.
///
/// Storage is the upper triangle of `XᵀX` (36 values), `Xᵀy` (8) and a count, in `Float`: 180 bytes per user
/// that has swiped. Solving is an 8×8 Cholesky factorisation, about a microsecond.
public struct RidgeStatistics: Sendable, Equatable {
    /// Upper triangle of XᵀX, row-major: (0,0) (0,1) … (0,7) (1,1) … (7,7).
    private(set) var gram: [Float]
    /// Xᵀy.
    private(set) var moment: SIMD8<Float>
    /// Number of observations.
    public private(set) var count: Int

    public init() {
        self.gram = [Float](repeating: 0, count: 36)
        self.moment = .zero
        self.count = 0
    }

    /// Adds one observation (features `x`, label `y`); `weight` scales it (1 for an ordinary swipe).
    public mutating func observe(_ x: RankingFeatures, label y: Double, weight: Double = 1) {
        let v = SIMD8<Float>(x.values)
        var index = 0
        for row in 0..<8 {
            let scaled = v[row] * Float(weight)
            for column in row..<8 {
                gram[index] += scaled * v[column]
                index += 1
            }
        }
        moment += v * Float(y * weight)
        count += 1
    }

    /// Removes an observation added before (an undone pass), so the model is as if it never happened.
    public mutating func forget(_ x: RankingFeatures, label y: Double) {
        observe(x, label: y, weight: -1)
        count -= 2
    }

    /// Merges another set of statistics (the population model is the sum over users).
    public mutating func add(_ other: RidgeStatistics) {
        for index in 0..<36 { gram[index] += other.gram[index] }
        moment += other.moment
        count += other.count
    }

    /// The ridge solution towards `prior` with strength `lambda` (> 0).
    public func weights(prior: SIMD8<Double>, lambda: Double) -> SIMD8<Double> {
        weights(prior: prior, lambdas: SIMD8(repeating: lambda))
    }

    /// The ridge solution towards `prior` with one strength per feature (each > 0): minimises
    /// `Σ (y − w·x)² + Σᵢ λᵢ (wᵢ − w₀ᵢ)²`. A small strength lets that weight follow the user's own swipes
    /// quickly (the intercept: how choosy they are), a large one keeps it near the population's.
    public func weights(prior: SIMD8<Double>, lambdas: SIMD8<Double>) -> SIMD8<Double> {
        precondition(lambdas.min() > 0, "ridge strength must be positive")
        // Build the symmetric system A w = r with A = XᵀX + λI, r = Xᵀy + λ w₀ in Double.
        var a = [Double](repeating: 0, count: 64)
        var index = 0
        for row in 0..<8 {
            for column in row..<8 {
                let value = Double(gram[index])
                a[row * 8 + column] = value
                a[column * 8 + row] = value
                index += 1
            }
            a[row * 8 + row] += lambdas[row]
        }
        var r = SIMD8<Double>(moment) + prior * lambdas
        // Cholesky A = L Lᵀ in place (lower triangle). A is positive definite since λ > 0 and XᵀX ⪰ 0;
        // float rounding can still push a pivot to ~0 after many `forget`s, so clamp it.
        for j in 0..<8 {
            var diagonal = a[j * 8 + j]
            for k in 0..<j { diagonal -= a[j * 8 + k] * a[j * 8 + k] }
            let pivot = diagonal > 1e-12 ? diagonal.squareRoot() : 1e-6
            a[j * 8 + j] = pivot
            for i in (j + 1)..<8 {
                var value = a[i * 8 + j]
                for k in 0..<j { value -= a[i * 8 + k] * a[j * 8 + k] }
                a[i * 8 + j] = value / pivot
            }
        }
        // Forward (L z = r) then backward (Lᵀ w = z) substitution.
        for i in 0..<8 {
            var value = r[i]
            for k in 0..<i { value -= a[i * 8 + k] * r[k] }
            r[i] = value / a[i * 8 + i]
        }
        for i in stride(from: 7, through: 0, by: -1) {
            var value = r[i]
            for k in (i + 1)..<8 { value -= a[k * 8 + i] * r[k] }
            r[i] = value / a[i * 8 + i]
        }
        return r
    }
}
