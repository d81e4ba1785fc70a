import Foundation
import KindredDiscovery

/// A deterministic random source (SplitMix64): the same seed gives the same population and swipes on every
/// machine, so the quality report is reproducible.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        self.state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    /// A standard normal draw (Box–Muller).
    public mutating func normal() -> Double {
        let u1 = Double.random(in: Double.ulpOfOne..<1, using: &self)
        let u2 = Double.random(in: 0..<1, using: &self)
        return (-2 * log(u1)).squareRoot() * cos(2 * .pi * u2)
    }
}

/// The size and shape of a generated population.
public struct PopulationSpec: Sendable {
    /// Members, and cities they live around (normal spread of `citySpreadKm`), ≥ 100 km apart. The default
    /// (10,000 in one city, 2 communities) gives each member ~2,500 (dating) to ~5,000 compatible members
    /// within the radius, far more than anyone swipes (20–200 warm-up swipes plus ~90 in the evaluation
    /// rounds), as in a real city; the first harness (3,000 in 4 cities: 190–375 each) let every policy swipe
    /// most of its pool, so ranking could only change the order, not who is seen.
    public var members = 10000
    public var cities = 1
    public var citySpreadKm = 12.0
    /// Communities: community 0 matches on gender (dating), the others do not (business, dogs, fitness).
    public var communities = 2
    public var radiusKm = 60
    public var seed: UInt64 = 1

    public init() {}
}

/// One generated member: what the service would know (interests, attributes, age, coarse position) and the
/// latent truth it does not (appeal, taste, traits, choosiness) that decides their swipes.
public struct Member: Sendable {
    public var community: Int
    /// 0 or 1; in a gender-matching community each member wants the other gender (a simplification).
    public var gender: Int
    public var latitude: Double
    public var longitude: Double
    public var ageYears: Int
    public var profile: RankingProfile
    /// Interest words by vocabulary index (the profile shows them; `profile.interests` folds them into bits).
    public var interestWords: [Int]
    // Latent.
    public var attractiveness: Double
    public var taste: SIMD4<Double>
    public var traits: SIMD4<Double>
    public var choosiness: Double
    /// Share of rounds in which the member opens the app and swipes.
    public var activity: Double
}

/// A compatible candidate of a member: who, and the coarse distance (8 bytes).
public struct Candidate: Sendable, Equatable {
    public var member: Int32
    public var distanceKm: UInt16

    public var index: Int { Int(member) }
    public var km: Int { Int(distanceKm) }
}

/// A generated population with its compatible-candidate lists.
public struct Population: Sendable {
    public let spec: PopulationSpec
    public let members: [Member]
    /// For each member, the compatible members of their community within both radii, nearest first.
    public let candidates: [[Candidate]]
    /// How each vocabulary word loads on the four trait dimensions.
    let loadings: [SIMD4<Double>]

    /// The interest vocabulary: 48 words, each loading on the four trait dimensions; a member's interests are
    /// drawn with probability rising with loading · traits, so interests reveal traits only partly.
    static let vocabularySize = 48

    public init(spec: PopulationSpec) {
        self.spec = spec
        var random = SeededRandom(seed: spec.seed)
        let cityCentres = (0..<spec.cities).map { index -> (Double, Double) in
            (48.0 + Double(index) * 1.1 + Double.random(in: -0.3...0.3, using: &random),
             2.0 + Double(index) * 1.7 + Double.random(in: -0.3...0.3, using: &random))
        }
        let loadings = (0..<Self.vocabularySize).map { _ in
            SIMD4(random.normal(), random.normal(), random.normal(), random.normal())
        }
        let words = (0..<Self.vocabularySize).map { "interest\($0)" }
        let fieldWords = (0..<8).map { "field=\($0)" }
        var members: [Member] = []
        members.reserveCapacity(spec.members)
        for _ in 0..<spec.members {
            let city = Int.random(in: 0..<spec.cities, using: &random)
            let kmPerDegree = 111.0
            let latitude = cityCentres[city].0 + random.normal() * spec.citySpreadKm / kmPerDegree
            let longitude = cityCentres[city].1
                + random.normal() * spec.citySpreadKm / (kmPerDegree * cos(cityCentres[city].0 * .pi / 180))
            let traits = SIMD4(random.normal(), random.normal(), random.normal(), random.normal())
            // Taste leans towards one's own traits (homophily) plus a personal part.
            let ownTaste = SIMD4(random.normal(), random.normal(), random.normal(), random.normal())
            let taste = (traits * 0.5 + ownTaste) / 1.12
            var scored: [(Double, Int)] = []
            for (index, loading) in loadings.enumerated() {
                let affinity = (loading * traits).sum() / 2 + random.normal() * 0.8
                scored.append((affinity, index))
            }
            scored.sort { $0.0 > $1.0 }
            let interestCount = Int.random(in: 3...7, using: &random)
            let interestWords = scored.prefix(interestCount).map(\.1)
            let interests = InterestSet(words: interestWords.map { words[$0] })
            // A business-field-like attribute: the field follows the first trait dimension, noisily.
            let field = min(7, max(0, Int((traits[0] + random.normal() * 0.7 + 2) * 2)))
            let community = Int.random(in: 0..<spec.communities, using: &random)
            members.append(
                Member(
                    community: community,
                    gender: Int.random(in: 0...1, using: &random),
                    latitude: latitude,
                    longitude: longitude,
                    ageYears: Int.random(in: 20...45, using: &random),
                    profile: RankingProfile(
                        interests: interests,
                        attributes: InterestSet(words: [fieldWords[field]]),
                        ageYears: 0,
                        lastActiveUnixMs: 0
                    ),
                    interestWords: interestWords,
                    attractiveness: random.normal(),
                    taste: taste,
                    traits: traits,
                    choosiness: 0.9 + random.normal() * 0.6,
                    activity: Double.random(in: 0.5...1, using: &random)
                )
            )
        }
        for index in members.indices { members[index].profile.ageYears = members[index].ageYears }
        self.members = members
        self.loadings = loadings

        // Compatible pairs within the radius, each list nearest first (ties by member number). Only pairs of one
        // community and less than a degree of latitude apart are measured (a cheap box first: 30k members are
        // 450M pairs), and the lists hold 8-byte entries (a 30k population's pools run to millions of entries).
        var candidates = [[Candidate]](repeating: [], count: members.count)
        let boxDegrees = Double(spec.radiusKm) / 100
        let order = members.indices.sorted { members[$0].latitude < members[$1].latitude }
        for (position, viewer) in order.enumerated() {
            let a = members[viewer]
            for other in order[(position + 1)...] {
                let b = members[other]
                if b.latitude - a.latitude > boxDegrees { break }
                guard a.community == b.community, abs(b.longitude - a.longitude) < 2 * boxDegrees else { continue }
                if a.community == 0 && a.gender == b.gender { continue }
                let km = coarseDistanceKm(a.latitude, a.longitude, b.latitude, b.longitude)
                guard km <= spec.radiusKm else { continue }
                candidates[viewer].append(Candidate(member: Int32(other), distanceKm: UInt16(km)))
                candidates[other].append(Candidate(member: Int32(viewer), distanceKm: UInt16(km)))
            }
        }
        for index in candidates.indices {
            candidates[index].sort { ($0.distanceKm, $0.member) < ($1.distanceKm, $1.member) }
        }
        self.candidates = candidates
    }

    /// The true probability that `viewer` likes `candidate`, through a logistic link, from what a card shows:
    /// the candidate's appeal (their photos: latent, learnable only from others' swipes), how the viewer's
    /// taste (a direction in trait space) rates the candidate's interests, the viewer's choosiness, distance
    /// and age gap. The recommender sees none of the latent values, only the profiles and the swipes.
    public func trueLikeProbability(_ viewer: Int, _ candidate: Int, distanceKm: Int) -> Double {
        let v = members[viewer]
        let c = members[candidate]
        var taste = 0.0
        for word in c.interestWords { taste += (loadings[word] * v.taste).sum() }
        taste /= Double(max(1, c.interestWords.count))
        let logit = 1.4 * c.attractiveness + 1.2 * taste - v.choosiness
            - 0.6 * Double(distanceKm) / Double(spec.radiusKm) - 0.05 * Double(abs(v.ageYears - c.ageYears))
        return 1 / (1 + exp(-logit))
    }
}

/// Distance in whole km (floor 1) between positions snapped to a ~1 km grid, as discovery computes it
/// between coarse cell centres (DESIGN §5): the harness ranks with the same coarse figures the service has.
public func coarseDistanceKm(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Int {
    func snap(_ value: Double) -> Double { (value / 0.01).rounded() * 0.01 }
    let (a1, o1, a2, o2) = (snap(lat1) * .pi / 180, snap(lon1) * .pi / 180, snap(lat2) * .pi / 180, snap(lon2) * .pi / 180)
    let h = pow(sin((a2 - a1) / 2), 2) + cos(a1) * cos(a2) * pow(sin((o2 - o1) / 2), 2)
    let km = 2 * 6371.0 * asin(min(1, h.squareRoot()))
    return max(1, Int(km.rounded()))
}
