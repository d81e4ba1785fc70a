import Foundation
import KindredProto

/// The four ready community configurations `profile-server communities install` creates (and the cluster's demo
/// mode reuses): one cluster, several apps.
public enum CommunityPresets {
    public typealias Community = Kindred.Common.V1.Community
    typealias Definition = Kindred.Common.V1.AttributeDefinition

    /// dating, bizmatch, playdates, fitness — each with explicit settings (no defaults involved), valid under
    /// `CommunityRules`.
    public static let all: [Community] = [dating, bizmatch, playdates, fitness]

    /// Mutual likes with gender matching, at least 2 photos, bio up to 500 characters, name and birthday
    /// immutable (as the tinder-clone and Kobble apps do). Interests are the built-in one-word list.
    public static let dating = community("dating", "Dating") {
        $0.mode = .mutual
        $0.genderMatching = true
        $0.requiredProfileFields = ["gender", "interested_in", "photos"]
        $0.minPhotos = 2
        $0.maxPhotos = 9
        $0.defaultRadiusKm = 50
        $0.maxRadiusKm = 160
    }

    /// Mutual likes without gender matching; business field, company, years of experience and role (startup
    /// or investor); default radius 500 km (the Fusion app).
    public static let bizmatch = community("bizmatch", "BizMatch") {
        $0.mode = .mutual
        $0.genderMatching = false
        $0.requiredProfileFields = ["bio", "photos"]
        $0.minPhotos = 1
        $0.maxPhotos = 6
        $0.defaultRadiusKm = 500
        $0.maxRadiusKm = 500
        $0.attributeDefinitions = [
            choice(
                "business_field", "Business field", required: true, multi: false,
                [
                    "technology", "finance", "healthcare", "retail", "energy", "media", "education", "real_estate",
                    "manufacturing", "other",
                ]),
            text("company", "Company", maxLength: 64, required: false),
            integer("years_experience", "Years of experience", 0...60, required: false),
            choice("role", "Role", required: true, multi: false, ["startup", "investor"]),
        ]
    }

    /// One-way connect (a playdate request), no gender matching; the dog's name, breed, weight in kg and
    /// personality from a list (the Fetch app).
    public static let playdates = community("playdates", "Playdates") {
        $0.mode = .oneWay
        $0.genderMatching = false
        $0.requiredProfileFields = ["photos", "location"]
        $0.minPhotos = 1
        $0.maxPhotos = 6
        $0.defaultRadiusKm = 10
        $0.maxRadiusKm = 50
        $0.attributeDefinitions = [
            text("dog_name", "Dog's name", maxLength: 32, required: true),
            text("breed", "Breed", maxLength: 64, required: true),
            integer("weight_kg", "Weight (kg)", 1...120, required: false),
            choice(
                "personality", "Personality", required: false, multi: true, maxChoices: 3,
                ["playful", "calm", "energetic", "shy", "friendly", "curious", "protective", "gentle"]),
        ]
    }

    /// One-way follow: a members list where following needs no consent.
    public static let fitness = community("fitness", "Fitness") {
        $0.mode = .oneWay
        $0.genderMatching = false
        $0.requiredProfileFields = []
        $0.minPhotos = 0
        $0.maxPhotos = 6
        $0.defaultRadiusKm = 25
        $0.maxRadiusKm = 200
        $0.attributeDefinitions = [
            choice(
                "activities", "Activities", required: false, multi: true, maxChoices: 5,
                ["running", "cycling", "yoga", "lifting", "swimming", "climbing", "hiking", "team_sports"])
        ]
    }

    private static func community(
        _ id: String,
        _ name: String,
        _ configure: (inout Kindred.Common.V1.CommunitySettings) -> Void
    ) -> Community {
        var settings = Kindred.Common.V1.CommunitySettings()
        settings.minAgeYears = 18
        settings.dailyLikeLimit = 200
        settings.undoWindowSeconds = 300
        settings.dailyUndoLimit = 3
        settings.hourlyMessageLimit = 300
        settings.signUpOpen = true
        configure(&settings)
        return .with {
            $0.communityId = id
            $0.displayName = name
            $0.settings = settings
        }
    }

    private static func text(_ key: String, _ label: String, maxLength: Int32, required: Bool) -> Definition {
        .with {
            $0.key = key
            $0.label = label
            $0.attributeType = .text
            $0.maxLength = maxLength
            $0.required = required
        }
    }

    private static func integer(_ key: String, _ label: String, _ range: ClosedRange<Int64>, required: Bool) -> Definition {
        .with {
            $0.key = key
            $0.label = label
            $0.attributeType = .integer
            $0.minValue = range.lowerBound
            $0.maxValue = range.upperBound
            $0.required = required
            $0.filterable = true
        }
    }

    private static func choice(
        _ key: String, _ label: String, required: Bool, multi: Bool, maxChoices: Int32 = 0, _ values: [String]
    ) -> Definition {
        .with {
            $0.key = key
            $0.label = label
            $0.attributeType = multi ? .multiChoice : .singleChoice
            $0.required = required
            $0.filterable = true
            $0.rankingFeature = true
            $0.choices = values.map { value in
                .with {
                    $0.value = value
                    $0.label = value.replacingOccurrences(of: "_", with: " ").capitalized
                }
            }
            if multi { $0.maxChoices = maxChoices == 0 ? Int32(values.count) : maxChoices }
        }
    }
}
