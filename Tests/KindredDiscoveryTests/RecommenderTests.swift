import Testing

@testable import KindredDiscovery
@testable import KindredDiscoveryQuality

@Suite("Recommender")
struct RecommenderTests {
    private func profile(_ words: [String], age: Int = 30) -> RankingProfile {
        RankingProfile(interests: InterestSet(words: words), attributes: InterestSet(), ageYears: age, lastActiveUnixMs: 0)
    }

    @Test("A viewer who likes only nearby people learns a positive closeness weight")
    func learnsCloseness() {
        // A weak ridge on the slopes (the default, 500, keeps them near the population's for a user's first
        // hundreds of swipes; the mechanism is the same).
        var settings = RecommenderSettings()
        settings.userLambda = 12
        var recommender = Recommender(settings: settings)
        let viewer = profile(["jazz"])
        for candidate in 1...200 {
            let km = candidate % 2 == 0 ? 2 : 300
            let features = recommender.features(
                viewer: 0, viewer, candidate: candidate, profile(["chess"]), distanceKm: km, nowUnixMs: 0
            )
            recommender.recordSwipe(
                viewer: 0, candidate: candidate, candidateInterests: InterestSet(words: ["chess"]),
                features: features, liked: km == 2
            )
        }
        let near = recommender.features(viewer: 0, viewer, candidate: 999, profile(["chess"]), distanceKm: 2, nowUnixMs: 0)
        let far = recommender.features(viewer: 0, viewer, candidate: 999, profile(["chess"]), distanceKm: 300, nowUnixMs: 0)
        let weights = recommender.weights(of: 0)
        #expect(Recommender.likeProbability(weights, near) > Recommender.likeProbability(weights, far) + 0.5)
        // Someone who never swiped gets the population prior, which learned the same from this viewer.
        #expect(!recommender.hasModel(1))
        #expect(recommender.weights(of: 1) == recommender.currentWeights(of: 1))
    }

    @Test("Appeal follows likes beyond each swiper's own like rate")
    func appeal() {
        var recommender = Recommender()
        let neutral = RankingFeatures(SIMD8(1, 0, 0, 0, 0, 0, 0, 0))
        for viewer in 0..<30 {
            recommender.recordSwipe(viewer: viewer, candidate: 100, candidateInterests: InterestSet(), features: neutral, liked: true)
            recommender.recordSwipe(viewer: viewer, candidate: 101, candidateInterests: InterestSet(), features: neutral, liked: false)
        }
        #expect(recommender.appealOf(100) > recommender.appealOf(101) + 0.5)
        recommender.erase(100)
        #expect(abs(recommender.appealOf(100) - recommender.populationLikeRate) < 1e-9)
    }

    @Test("On a small generated population the learned ranking beats random decks and predicts likes")
    func smallPopulation() {
        var spec = PopulationSpec()
        spec.members = 500
        spec.cities = 2
        spec.seed = 42
        var simulation = QualitySimulation(population: Population(spec: spec))
        simulation.rounds = 4
        simulation.warmupSwipes = 30
        let report = simulation.run()
        #expect(report.modelAUC > 0.65)
        #expect(report.ceilingAUC > report.modelAUC)
        #expect((report.matchesPer100[.reciprocal] ?? 0) > (report.matchesPer100[.random] ?? 0))
        #expect((report.matchesPer100[.oracle] ?? 0) >= (report.matchesPer100[.random] ?? 0))
    }
}
