import Foundation
import Testing

@testable import KindredDiscovery
@testable import KindredDiscoveryQuality

@Suite("Recommender")
struct RecommenderTests {
    private func profile(_ words: [String], age: Int = 30) -> RankingProfile {
        RankingProfile(interests: InterestSet(words: words), attributes: InterestSet(), ageYears: age, lastActiveUnixMs: 0)
    }

    @Test("A member's whole model is 32 bytes, swiper or not (the 5M budget is 48)")
    func memberStateSize() {
        #expect(MemoryLayout<MemberState>.stride == 32)
    }

    @Test("The population slopes are fitted on the logit scale: likes of nearby people teach closeness")
    func learnsCloseness() {
        var recommender = Recommender()
        var random = SeededRandom(seed: 3)
        // Everyone likes near people (2 km) with probability 0.7 and far ones (300 km) with 0.1.
        for swipe in 0..<4000 {
            let (viewer, candidate) = (swipe % 51, 60 + swipe % 97)  // each viewer sees near and far people
            let km = swipe % 2 == 0 ? 2 : 300
            let features = recommender.features(
                viewer: viewer, profile(["jazz"]), candidate: candidate, profile(["chess"]), distanceKm: km, nowUnixMs: 0)
            let liked = Double.random(in: 0..<1, using: &random) < (km == 2 ? 0.7 : 0.1)
            recommender.recordSwipe(
                viewer: viewer, candidate: candidate, candidateInterests: InterestSet(words: ["chess"]), features: features,
                liked: liked)
        }
        recommender.refreshPopulation()
        let near = recommender.features(viewer: 999, profile(["jazz"]), candidate: 998, profile(["chess"]), distanceKm: 2, nowUnixMs: 0)
        let far = recommender.features(viewer: 999, profile(["jazz"]), candidate: 998, profile(["chess"]), distanceKm: 300, nowUnixMs: 0)
        // A member who never swiped gets the population model; its probabilities are the generating ones.
        #expect(!recommender.hasModel(999))
        #expect(abs(recommender.likeProbability(viewer: 999, near) - 0.7) < 0.05)
        #expect(abs(recommender.likeProbability(viewer: 999, far) - 0.1) < 0.05)
        #expect(recommender.weights[3] > 2)
    }

    @Test("Each member's choosiness shifts their predictions; appeal follows likes beyond each swiper's own rate")
    func choosinessAndAppeal() {
        var recommender = Recommender()
        let neutral = RankingFeatures(SIMD8(1, 0, 0, 0, 0, 0, 0, 0))
        for viewer in 0..<30 {
            recommender.recordSwipe(viewer: viewer, candidate: 100, candidateInterests: InterestSet(), features: neutral, liked: true)
            recommender.recordSwipe(viewer: viewer, candidate: 101, candidateInterests: InterestSet(), features: neutral, liked: false)
        }
        for candidate in 200..<240 {
            recommender.recordSwipe(viewer: 50, candidate: candidate, candidateInterests: InterestSet(), features: neutral, liked: false)
        }
        #expect(recommender.appealOf(100) > recommender.appealOf(101) + 1)
        #expect(recommender.likeProbability(viewer: 50, neutral) < recommender.likeProbability(viewer: 0, neutral) - 0.1)
        recommender.erase(100)
        #expect(recommender.appealOf(100) == 0)
        #expect(recommender.state(of: 100).isEmpty)
    }

    @Test("Undoing a swipe restores both members' state exactly (taste, counts, appeal)")
    func forgetRestores() {
        var recommender = Recommender()
        let hikers = InterestSet(words: ["hiking", "climbing"])
        let gamers = InterestSet(words: ["gaming", "chess"])
        recommender.setTasteBasis(TasteBasis(interests: Array(repeating: hikers, count: 10) + Array(repeating: gamers, count: 10), components: 4))
        let features = RankingFeatures(SIMD8(1, 0.2, 0, 0.5, 0.1, 0, 0, 1))
        for n in 0..<20 {
            recommender.recordSwipe(viewer: 0, candidate: 10 + n, candidateInterests: n % 2 == 0 ? hikers : gamers, features: features, liked: n % 2 == 0)
        }
        let (viewerBefore, candidateBefore) = (recommender.state(of: 0), recommender.state(of: 5))
        for liked in [true, false] {
            recommender.recordSwipe(viewer: 0, candidate: 5, candidateInterests: hikers, features: features, liked: liked)
            #expect(recommender.state(of: 0) != viewerBefore)
            recommender.forgetSwipe(viewer: 0, candidate: 5, candidateInterests: hikers, features: features, liked: liked)
            #expect(recommender.state(of: 0) == viewerBefore)
            #expect(recommender.state(of: 5) == candidateBefore)
        }
    }

    @Test("Taste: a viewer who likes hikers and passes on gamers is predicted to like a new hiker more")
    func taste() {
        var recommender = Recommender()
        let hikers = InterestSet(words: ["hiking", "climbing"])
        let gamers = InterestSet(words: ["gaming", "chess"])
        recommender.setTasteBasis(TasteBasis(interests: Array(repeating: hikers, count: 10) + Array(repeating: gamers, count: 10), components: 4))
        for n in 0..<20 {
            let hiker = n % 2 == 0
            let features = recommender.features(
                viewer: 0, profile(["jazz"]), candidate: 10 + n,
                RankingProfile(interests: hiker ? hikers : gamers, attributes: InterestSet(), ageYears: 30, lastActiveUnixMs: 0),
                distanceKm: 5, nowUnixMs: 0)
            recommender.recordSwipe(viewer: 0, candidate: 10 + n, candidateInterests: hiker ? hikers : gamers, features: features, liked: hiker)
        }
        let viewer = recommender.state(of: 0)
        #expect(recommender.tasteFeature(viewer, InterestSet(words: ["hiking"])) > 0.05)
        #expect(recommender.tasteFeature(viewer, InterestSet(words: ["gaming"])) < -0.05)
        #expect(recommender.tasteFeature(MemberState(), InterestSet(words: ["hiking"])) == 0)
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
        simulation.pool = 100
        let report = simulation.run()
        #expect(report.modelAUC > 0.65)
        #expect(report.ceilingAUC > report.modelAUC)
        #expect((report.matchesPer100[.reciprocal] ?? 0) > (report.matchesPer100[.random] ?? 0))
        #expect((report.matchesPer100[.oracle] ?? 0) >= (report.matchesPer100[.random] ?? 0))
    }

    @Test("The harness's reciprocal policy scores exactly as the service's deck ranks")
    func harnessRanksAsTheService() {
        var spec = PopulationSpec()
        spec.members = 300
        spec.cities = 1
        spec.communities = 1
        spec.seed = 5
        let population = Population(spec: spec)
        let simulation = QualitySimulation(population: population)
        // The service's state: every member indexed where the harness put them, the same swipes learnt through
        // the service's path (CommunityState.learn), with the taste directions from the same interests.
        var state = CommunityState()
        var recommender = Recommender()
        recommender.reserve(population.members.count - 1)
        for (n, member) in population.members.enumerated() {
            state.upsert(
                IndexedMember(
                    user: UserKey(high: 0, low: UInt64(n)), latitude: member.latitude, longitude: member.longitude,
                    gender: member.gender == 0 ? 1 : 2, interestedIn: member.gender == 0 ? 0b100 : 0b010,
                    birthDate: Int32(2026 - member.ageYears) * 10000 + 101, ageMin: 18, ageMax: 99, radiusKm: 100,
                    hideDistance: false, interests: member.profile.interests, attributes: member.profile.attributes,
                    lastActiveMinutes: 1000, joinedMinutes: 0),
                facts: MemberFacts())
            #expect(state.index.slot(of: UserKey(high: 0, low: UInt64(n))) == Int32(n))
        }
        state.refreshTasteBasis()
        recommender.refreshTasteBasis(from: population.members.map(\.profile.interests))
        #expect(state.recommender.basis == recommender.basis)
        var random = SeededRandom(seed: 9)
        // Who liked whom: the index holds the swipes, and a candidate who liked the viewer scores as such.
        var likedBy = [Set<Int>](repeating: [], count: population.members.count)
        for viewer in population.members.indices {
            for pick in population.candidates[viewer].prefix(8) {
                let liked = Bool.random(using: &random)
                state.index.recordSwipe(
                    viewer: UserKey(high: 0, low: UInt64(viewer)), target: UserKey(high: 0, low: UInt64(pick.member)), liked: liked)
                if liked { likedBy[pick.index].insert(viewer) }
                let features = RankingFeatures(SIMD8((0..<8).map { _ in Double.random(in: 0...1, using: &random) }))
                let interests = population.members[pick.index].profile.interests
                state.learn(
                    viewer: UserKey(high: 0, low: UInt64(viewer)), target: UserKey(high: 0, low: UInt64(pick.member)),
                    features: features, interests: interests, liked: liked)
                recommender.recordSwipe(viewer: viewer, candidate: pick.index, candidateInterests: interests, features: features, liked: liked)
            }
        }
        #expect(state.recommender.states == recommender.states)
        #expect(state.recommender.weights == recommender.weights)
        var (compared, likers) = (0, 0)
        for viewer in stride(from: 0, to: population.members.count, by: 7) {
            let key = UserKey(high: 0, low: UInt64(viewer))
            let pool = state.index.candidates(for: key, DeckQuery(limit: 50, today: 2026_11_24)) ?? []
            let ranked = state.index.rank(pool, viewer: key, recommender: state.recommender, nowMinutes: 1000)
            let scorer = simulation.scorer(recommender, viewer: viewer)
            for entry in ranked {
                let candidate = Candidate(member: Int32(entry.match.user.low), distanceKm: UInt16(entry.match.distanceKm))
                let likedViewer = likedBy[viewer].contains(candidate.index)
                #expect(simulation.reciprocalScore(scorer, recommender, candidate, likedViewer: likedViewer) == entry.score)
                compared += 1
                if likedViewer { likers += 1 }
            }
        }
        #expect(compared > 100)
        #expect(likers > 5)
    }
}

@Suite("Community model state")
struct CommunityModelStateTests {
    static func member(_ n: UInt64) -> IndexedMember {
        IndexedMember(
            user: UserKey(high: 0, low: n), latitude: 52.52, longitude: 13.40, gender: 1, interestedIn: 0b010,
            birthDate: 1996_01_01, ageMin: 18, ageMax: 99, radiusKm: 50, hideDistance: false,
            interests: InterestSet(words: ["w\(n % 5)"]), attributes: InterestSet(), lastActiveMinutes: 0, joinedMinutes: 0)
    }

    @Test("A member who leaves keeps their model for their return; a slot reused by someone else starts empty; deletion erases")
    func departedMembers() {
        var state = CommunityState()
        for n: UInt64 in 1...3 { state.upsert(Self.member(n), facts: MemberFacts()) }
        let (a, b, c) = (UserKey(high: 0, low: 1), UserKey(high: 0, low: 2), UserKey(high: 0, low: 3))
        let features = RankingFeatures(SIMD8(1, 0, 0, 0.5, 0, 0, 0, 1))
        state.learn(viewer: a, target: b, features: features, interests: InterestSet(), liked: true)
        state.learn(viewer: c, target: a, features: features, interests: InterestSet(), liked: false)
        let model = state.modelState(a)
        #expect(model?.swipesGiven == 1 && model?.swipesReceived == 1)
        _ = state.remove(a)
        #expect(state.modelState(a) == model)
        // Someone new takes the freed slot with an empty model; a swipe on the departed member still counts.
        state.upsert(Self.member(4), facts: MemberFacts())
        #expect(state.modelState(UserKey(high: 0, low: 4)) == MemberState())
        state.learn(viewer: b, target: a, features: features, interests: InterestSet(), liked: true)
        #expect(state.modelState(a)?.swipesReceived == 2)
        state.upsert(Self.member(1), facts: MemberFacts())
        #expect(state.modelState(a)?.swipesGiven == 1)
        #expect(state.modelState(a)?.swipesReceived == 2)
        #expect(state.departed.isEmpty)
        state.erase(a)
        #expect(state.modelState(a) == nil)
        #expect(state.departed.isEmpty)
    }
}
