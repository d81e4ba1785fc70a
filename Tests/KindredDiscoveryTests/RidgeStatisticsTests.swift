import Testing

@testable import KindredDiscovery

@Suite("Ridge statistics")
struct RidgeStatisticsTests {
    private func features(_ values: Double...) -> RankingFeatures {
        var vector = SIMD8<Double>.zero
        for (index, value) in values.enumerated() { vector[index] = value }
        return RankingFeatures(vector)
    }

    @Test("Without observations the weights are the prior")
    func emptyIsPrior() {
        let prior = SIMD8<Double>(0.3, 0.1, -0.2, 0, 0, 0.5, 0, 0)
        let weights = RidgeStatistics().weights(prior: prior, lambda: 5)
        for index in 0..<8 { #expect(abs(weights[index] - prior[index]) < 1e-9) }
    }

    @Test("Many noiseless observations recover the generating weights whatever the prior")
    func recoversWeights() {
        let truth = SIMD8<Double>(0.2, 0.5, -0.3, 0.1, 0, 0, 0, 0)
        var statistics = RidgeStatistics()
        var random = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let x = features(
                1, .random(in: 0...1, using: &random), .random(in: 0...1, using: &random),
                .random(in: 0...1, using: &random)
            )
            statistics.observe(x, label: (truth * x.values).sum())
        }
        let weights = statistics.weights(prior: SIMD8(repeating: 1), lambda: 0.01)
        for index in 0..<4 { #expect(abs(weights[index] - truth[index]) < 0.01, "weight \(index)") }
    }

    @Test("A strong ridge keeps a few observations close to the prior; a weak one follows them")
    func strengthDecides() {
        var statistics = RidgeStatistics()
        for _ in 0..<5 { statistics.observe(features(1), label: 1) }
        let prior = SIMD8<Double>(0.2, 0, 0, 0, 0, 0, 0, 0)
        #expect(statistics.weights(prior: prior, lambda: 1000)[0] < 0.21)
        #expect(statistics.weights(prior: prior, lambda: 0.001)[0] > 0.99)
    }

    @Test("Per-feature strengths: a weak one follows the data, a strong one keeps its weight at the prior")
    func perFeatureStrengths() {
        var statistics = RidgeStatistics()
        for _ in 0..<20 { statistics.observe(features(1, 1), label: 1) }
        var lambdas = SIMD8<Double>(repeating: 1e6)
        lambdas[0] = 0.001
        let weights = statistics.weights(prior: .zero, lambdas: lambdas)
        #expect(weights[0] > 0.99)
        #expect(abs(weights[1]) < 0.01)
        // One strength for all is the same as the scalar form.
        let same = statistics.weights(prior: .zero, lambdas: SIMD8(repeating: 3))
        let scalar = statistics.weights(prior: .zero, lambda: 3)
        for index in 0..<8 { #expect(abs(same[index] - scalar[index]) < 1e-12) }
    }

    @Test("Forgetting an observation restores the earlier model (an undone pass)")
    func forgetUndoes() {
        var statistics = RidgeStatistics()
        statistics.observe(features(1, 0.5, 0.2), label: 1)
        statistics.observe(features(1, 0.1, 0.9), label: 0)
        let before = statistics
        statistics.observe(features(1, 0.7, 0.3), label: 0)
        statistics.forget(features(1, 0.7, 0.3), label: 0)
        #expect(statistics.count == before.count)
        let a = statistics.weights(prior: .zero, lambda: 1)
        let b = before.weights(prior: .zero, lambda: 1)
        for index in 0..<8 { #expect(abs(a[index] - b[index]) < 1e-5) }
    }
}

@Suite("AUC")
struct AUCTests {
    @Test(
        "Known areas",
        arguments: [
            ([0.1, 0.4, 0.35, 0.8], [false, false, true, true], 0.75),
            ([0.9, 0.8, 0.1, 0.2], [true, true, false, false], 1.0),
            ([0.9, 0.8, 0.1, 0.2], [false, false, true, true], 0.0),
            ([0.5, 0.5, 0.5, 0.5], [true, false, true, false], 0.5),
        ]
    )
    func known(scores: [Double], labels: [Bool], expected: Double) {
        #expect(abs((areaUnderROC(scores: scores, labels: labels) ?? -1) - expected) < 1e-12)
    }

    @Test("Undefined without both classes")
    func oneClass() {
        #expect(areaUnderROC(scores: [0.1, 0.2], labels: [true, true]) == nil)
        #expect(areaUnderROC(scores: [], labels: []) == nil)
    }
}

@Suite("Interest sets and taste")
struct InterestSetTests {
    @Test("Shared words share bits; the hash is stable across processes")
    func jaccard() {
        let a = InterestSet(words: ["hiking", "jazz", "coffee"])
        let b = InterestSet(words: ["hiking", "jazz", "chess"])
        #expect(a.jaccard(a) == 1)
        #expect(a.jaccard(b) > 0.3 && a.jaccard(b) < 1)
        #expect(InterestSet().jaccard(InterestSet()) == 0)
        // FNV-1a of "a" (a published test vector): the value must never change, stored sets depend on it.
        #expect(InterestSet.stableHash("a") == 0xaf63_dc4c_8601_ec8c)
    }

    @Test("The taste directions follow interests that go together, and members' tastes carry over to new ones")
    func tasteBasis() {
        // Half the members like the outdoors (bits 0, 1, 2 together), half indoor things (bits 10, 11, 12).
        let outdoor = InterestSet(bits: 0b111)
        let indoor = InterestSet(bits: 0b111 << 10)
        var sets: [InterestSet] = []
        for n in 0..<100 { sets.append(n % 2 == 0 ? InterestSet(bits: outdoor.bits & ~(1 << UInt64(n % 3))) : indoor) }
        let basis = TasteBasis(interests: sets, components: 4)
        #expect(!basis.isEmpty)
        // Outdoor and indoor people sit apart on the first direction; a hiker alone sits with the outdoor people.
        let (a, b, hiker) = (basis.coordinates(of: outdoor), basis.coordinates(of: indoor), basis.coordinates(of: InterestSet(bits: 1)))
        #expect(abs(a[0] - b[0]) > 0.5)
        #expect((hiker[0] - b[0]) * (a[0] - b[0]) > 0)
        #expect(basis.coordinates(of: InterestSet()) == .zero)
        #expect(TasteBasis(interests: sets, components: 0).isEmpty)
        #expect(TasteBasis().coordinates(of: outdoor) == .zero)
        // The same directions: coordinates carry over unchanged; from no basis there is nothing to carry.
        let same = basis.transfer(from: basis)
        let taste = SIMD4<Float>(0.3, 0, 0, 0)  // (along the main direction)
        #expect(((same(taste) - taste) * (same(taste) - taste)).sum() < 1e-8)
        #expect(basis.transfer(from: TasteBasis())(taste) == .zero)
    }
}
