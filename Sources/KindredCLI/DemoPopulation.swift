import Foundation
import KindredPresets
import KindredProto

/// The demo members `kindred admin seed` creates, as values: who they are, where, and whom they swipe. Everything
/// follows from the seed number and the member count (the same seed gives the same people, byte for byte), so
/// re-running the seed finds the members it made before instead of making new ones.
struct DemoPopulation: Sendable {
    struct City: Sendable, Hashable {
        var name: String
        var latitude: Double
        var longitude: Double
    }

    struct Member: Sendable {
        var index: Int
        var community: String
        var email: String
        var username: String
        var fields: Kindred.Api.V1.ProfileFields
        var city: City
        var latitude: Double
        var longitude: Double
        /// One seed per photo to generate (`DemoPortrait`).
        var photoSeeds: [UInt64]
    }

    struct Swipe: Sendable, Hashable {
        var from: Int
        var to: Int
        var like: Bool
    }

    static let cities = [
        City(name: "Berlin", latitude: 52.5200, longitude: 13.4050),
        City(name: "Lisbon", latitude: 38.7223, longitude: -9.1393),
        City(name: "Austin", latitude: 30.2672, longitude: -97.7431),
        City(name: "Nairobi", latitude: -1.2921, longitude: 36.8219),
        City(name: "Seoul", latitude: 37.5665, longitude: 126.9780),
    ]

    let seed: UInt64
    let members: [Member]
    /// Every member's password: demo accounts are meant to be signed into (the seed prints it).
    let password: String

    /// `count` members spread over the four preset communities (every fourth member in each) and over the
    /// cities: one city per 40 members, at most five, so that small seeds still give everyone neighbours.
    init(seed: UInt64, count: Int) {
        self.seed = seed
        self.password = "kindred-demo-\(seed)-password"
        let communities = CommunityPresets.all.map(\.communityId)
        let cities = Array(Self.cities.prefix(max(1, min(Self.cities.count, count / 40))))
        self.members = (0..<count).map { index in
            Self.member(
                seed: seed,
                index: index,
                community: communities[index % communities.count],
                city: cities[(index / communities.count) % cities.count]
            )
        }
    }

    static func email(seed: UInt64, index: Int) -> String { "demo-\(seed)-\(index)@example.com" }

    static func member(seed: UInt64, index: Int, community: String, city: City) -> Member {
        var random = SeededRandom(seed: seed, stream: 1, item: UInt64(index))
        var fields = Kindred.Api.V1.ProfileFields()
        let gender: Kindred.Common.V1.Gender = random.chance(0.1) ? .nonbinary : random.chance(0.5) ? .woman : .man
        let names = gender == .woman ? Self.womenNames : gender == .man ? Self.menNames : Self.neutralNames
        fields.displayName = random.pick(names)
        fields.birthDate = .with {
            $0.year = Int32(1976 + random.below(28))
            $0.month = Int32(1 + random.below(12))
            $0.day = Int32(1 + random.below(28))
        }
        fields.interests = random.sample(Self.interests, 3 + random.below(3))
        fields.city = city.name
        var photos = 1
        switch community {
        case "dating":
            fields.gender = gender
            fields.interestedIn =
                switch gender {
                case .woman: random.chance(0.75) ? [.man] : random.chance(0.5) ? [.woman] : [.man, .woman]
                case .man: random.chance(0.8) ? [.woman] : random.chance(0.5) ? [.man] : [.man, .woman]
                default: [.woman, .man, .nonbinary]
                }
            fields.bio = "\(random.pick(Self.openers)) \(fields.interests[0]) and \(fields.interests[1])."
            photos = 2
        case "bizmatch":
            let field = random.pick(Self.businessFields)
            let investor = random.chance(0.3)
            fields.bio =
                investor
                ? "Investing in \(field.replacingOccurrences(of: "_", with: " ")) at seed and series A."
                : "Building a \(field.replacingOccurrences(of: "_", with: " ")) startup; looking for partners."
            fields.jobTitle = investor ? "Partner" : random.pick(["Founder", "CEO", "CTO", "COO"])
            fields.attributes = [
                Self.choice("business_field", field),
                Self.choice("role", investor ? "investor" : "startup"),
                Self.text(
                    "company",
                    random.pick(Self.companyStems) + random.pick(["ly", "io", "hub", "works", "labs"])
                ),
                Self.integer("years_experience", Int64(random.below(25))),
            ]
        case "playdates":
            let dog = random.pick(Self.dogNames)
            fields.bio = "\(dog) loves the park and other dogs."
            fields.attributes = [
                Self.text("dog_name", dog),
                Self.text("breed", random.pick(Self.breeds)),
                Self.integer("weight_kg", Int64(4 + random.below(40))),
                Self.choices("personality", random.sample(Self.personalities, 1 + random.below(3))),
            ]
        default:  // fitness
            let activities = random.sample(Self.activities, 1 + random.below(3))
            fields.bio =
                "Into \(activities.map { $0.replacingOccurrences(of: "_", with: " ") }.joined(separator: " and "))."
            fields.attributes = [Self.choices("activities", activities)]
        }
        // Within ~4 km of the centre (a degree of latitude is ~111 km).
        let latitude = city.latitude + (random.unit() - 0.5) * 0.07
        let longitude = city.longitude + (random.unit() - 0.5) * 0.07 / cos(city.latitude * .pi / 180)
        return Member(
            index: index,
            community: community,
            email: Self.email(seed: seed, index: index),
            username: "demo\(seed)_\(index)",
            fields: fields,
            city: city,
            latitude: latitude,
            longitude: longitude,
            photoSeeds: (0..<photos).map { seed &* 1_000_003 &+ UInt64(index) &* 16 &+ UInt64($0) }
        )
    }

    /// Whether `a` and `b` may be shown to each other: same community and city, and in dating each fits the
    /// other's gender preference.
    static func compatible(_ a: Member, _ b: Member) -> Bool {
        guard a.index != b.index, a.community == b.community, a.city == b.city else { return false }
        guard a.community == "dating" else { return true }
        return a.fields.interestedIn.contains(b.fields.gender) && b.fields.interestedIn.contains(a.fields.gender)
    }

    /// Each member swipes on up to 8 compatible neighbours, never more than half of them (so every deck keeps
    /// cards), liking about two in three: mutual likes become matches (dating, bizmatch) or mutual connections.
    var swipes: [Swipe] {
        self.members.flatMap { member -> [Swipe] in
            var random = SeededRandom(seed: self.seed, stream: 2, item: UInt64(member.index))
            let candidates = self.members.filter { Self.compatible(member, $0) }.map(\.index)
            return random.sample(candidates, min(8, candidates.count / 2)).map {
                Swipe(from: member.index, to: $0, like: random.chance(0.67))
            }
        }
    }

    static func choice(_ key: String, _ value: String) -> Kindred.Common.V1.AttributeValue {
        .with {
            $0.key = key
            $0.value = .choiceValue(value)
        }
    }

    static func choices(_ key: String, _ values: [String]) -> Kindred.Common.V1.AttributeValue {
        .with {
            $0.key = key
            $0.value = .choiceValues(.with { $0.values = values })
        }
    }

    static func text(_ key: String, _ value: String) -> Kindred.Common.V1.AttributeValue {
        .with {
            $0.key = key
            $0.value = .textValue(value)
        }
    }

    static func integer(_ key: String, _ value: Int64) -> Kindred.Common.V1.AttributeValue {
        .with {
            $0.key = key
            $0.value = .integerValue(value)
        }
    }

    static let womenNames = [
        "Amara", "Ana", "Beatriz", "Chloe", "Emma", "Fatima", "Grace", "Hana", "Ines", "Jisoo", "Lena", "Maya",
        "Mia", "Nia", "Olivia", "Sofia", "Wanjiru", "Yuna", "Zara", "Clara",
    ]
    static let menNames = [
        "Ahmed", "Ben", "Carlos", "Daniel", "Diego", "Felix", "Jonas", "Kamau", "Leon", "Lucas", "Malik", "Minjun",
        "Noah", "Omar", "Otieno", "Pedro", "Sam", "Seojun", "Tiago", "Tom",
    ]
    static let neutralNames = ["Alex", "Ari", "Charlie", "Jamie", "Jordan", "Kai", "Robin", "Sasha", "Taylor", "Noor"]
    static let interests = [
        "hiking", "jazz", "cooking", "photography", "climbing", "coffee", "travel", "reading", "cinema", "football",
        "yoga", "gardening", "painting", "chess", "running", "surfing", "techno", "wine", "boardgames", "baking",
        "cycling", "museums", "poetry", "dancing",
    ]
    static let openers = ["Happiest when it's about", "Ask me about", "Weekends are for", "Looking for someone into"]
    static let businessFields = [
        "technology", "finance", "healthcare", "retail", "energy", "media", "education", "real_estate",
        "manufacturing", "other",
    ]
    static let companyStems = [
        "Nova", "Blue", "Kite", "Orbit", "Maple", "Quanta", "Lumen", "Pivot", "Harbor", "Sprout",
    ]
    static let dogNames = ["Bella", "Max", "Luna", "Rocky", "Coco", "Milo", "Nala", "Buddy", "Daisy", "Simba"]
    static let breeds = [
        "Labrador", "Beagle", "Poodle", "Border Collie", "Dachshund", "Mixed", "Boxer", "Pug", "Husky",
    ]
    static let personalities = ["playful", "calm", "energetic", "shy", "friendly", "curious", "protective", "gentle"]
    static let activities = ["running", "cycling", "yoga", "lifting", "swimming", "climbing", "hiking", "team_sports"]
}
