import KindredProto
import KindredServiceKit

/// The rules of community configuration as values: defaults, validation (every broken rule named as a field
/// violation) and update paths. No I/O; `CommunityRulesTests` tables cover them.
public enum CommunityRules {
    typealias Settings = Kindred.Common.V1.CommunitySettings
    typealias Violation = Kindred.Common.V1.FieldViolation

    /// Built-in fields a community may require ("display_name" and "birth_date" always are).
    public static let requirableFields: Set<String> = ["bio", "gender", "interested_in", "photos", "location"]
    public static let maxAttributeDefinitions = 32
    public static let maxPhotosCeiling = 9
    /// All settings together, encoded: Home carries them next to 50 cards (services/README.md, "Text and page
    /// limits"); 32 definitions of 200 choices with long labels would otherwise reach 2 MB.
    public static let maxSettingsBytes = 262_144

    /// The settings paths UpdateCommunity accepts, after "settings.".
    public static let settingsPaths: Set<String> = [
        "mode", "required_profile_fields", "attribute_definitions", "min_photos", "max_photos", "min_age_years",
        "default_radius_km", "max_radius_km", "gender_matching", "daily_like_limit", "undo_window_seconds",
        "daily_undo_limit", "hourly_message_limit", "sign_up_open",
    ]

    /// Community ids: 2...32 characters of [a-z0-9-].
    public static func isValidID(_ id: String) -> Bool {
        (2...32).contains(id.utf8.count) && id.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 45 }
    }

    /// CreateCommunity: zero values take the documented defaults.
    static func withDefaults(_ input: Settings) -> Settings {
        var settings = input
        // false is the zero value: a community is created open and closed by UpdateCommunity.
        settings.signUpOpen = true
        if settings.minPhotos == 0 { settings.minPhotos = 1 }
        if settings.maxPhotos == 0 { settings.maxPhotos = max(6, settings.minPhotos) }
        if settings.minAgeYears == 0 { settings.minAgeYears = 18 }
        if settings.defaultRadiusKm == 0 { settings.defaultRadiusKm = 50 }
        if settings.maxRadiusKm == 0 { settings.maxRadiusKm = max(160, settings.defaultRadiusKm) }
        if settings.dailyLikeLimit == 0 { settings.dailyLikeLimit = 200 }
        if settings.undoWindowSeconds == 0 { settings.undoWindowSeconds = 300 }
        if settings.dailyUndoLimit == 0 { settings.dailyUndoLimit = 3 }
        if settings.hourlyMessageLimit == 0 { settings.hourlyMessageLimit = 300 }
        for index in settings.attributeDefinitions.indices {
            var definition = settings.attributeDefinitions[index]
            if definition.attributeType == .text, definition.maxLength == 0 { definition.maxLength = 100 }
            if definition.attributeType == .multiChoice, definition.maxChoices == 0 {
                definition.maxChoices = Int32(definition.choices.count)
            }
            settings.attributeDefinitions[index] = definition
        }
        return settings
    }

    /// Every rule the settings break, as field violations (empty: valid).
    static func violations(_ settings: Settings, field prefix: String = "settings") -> [Violation] {
        var found: [Violation] = []
        func check(_ ok: Bool, _ field: String, _ hint: String) {
            if !ok { found.append(ProfileError.violation("\(prefix).\(field)", "OUT_OF_RANGE", hint)) }
        }
        switch settings.mode {
        case .mutual, .oneWay: break
        default: found.append(ProfileError.violation("\(prefix).mode", "REQUIRED", "COMMUNITY_MODE_MUTUAL or _ONE_WAY"))
        }
        let required = settings.requiredProfileFields
        check(
            required.allSatisfy(Self.requirableFields.contains) && Set(required).count == required.count,
            "required_profile_fields", "distinct values of bio, gender, interested_in, photos, location")
        check((0...Self.maxPhotosCeiling).contains(Int(settings.minPhotos)), "min_photos", "0..9")
        check(
            (1...Self.maxPhotosCeiling).contains(Int(settings.maxPhotos)) && settings.maxPhotos >= settings.minPhotos,
            "max_photos", "1..9 and >= min_photos")
        check((13...99).contains(settings.minAgeYears), "min_age_years", "13..99")
        check((1...500).contains(settings.defaultRadiusKm), "default_radius_km", "1..500")
        check(
            (1...500).contains(settings.maxRadiusKm) && settings.maxRadiusKm >= settings.defaultRadiusKm,
            "max_radius_km", "1..500 and >= default_radius_km")
        check((1...10_000).contains(settings.dailyLikeLimit), "daily_like_limit", "1..10000")
        check((0...3600).contains(settings.undoWindowSeconds), "undo_window_seconds", "0..3600")
        check((0...100).contains(settings.dailyUndoLimit), "daily_undo_limit", "0..100")
        check((1...10_000).contains(settings.hourlyMessageLimit), "hourly_message_limit", "1..10000")
        found += Self.definitionViolations(settings.attributeDefinitions, field: "\(prefix).attribute_definitions")
        if found.isEmpty, ((try? settings.serializedBytes().count) ?? .max) > Self.maxSettingsBytes {
            found.append(ProfileError.violation(prefix, "TOO_MANY_BYTES", "all settings together at most 262144 bytes"))
        }
        return found
    }

    static func definitionViolations(_ definitions: [Kindred.Common.V1.AttributeDefinition], field: String) -> [Violation] {
        var found: [Violation] = []
        if definitions.count > Self.maxAttributeDefinitions {
            found.append(ProfileError.violation(field, "TOO_MANY", "at most 32 attribute definitions"))
        }
        var keys = Set<String>()
        for (index, definition) in definitions.enumerated() {
            let at = "\(field)[\(index)]"
            func bad(_ name: String, _ reason: String, _ hint: String) {
                found.append(ProfileError.violation("\(at).\(name)", reason, hint))
            }
            if !Self.isValidAttributeKey(definition.key) {
                bad("key", "INVALID_FORMAT", "1..32 characters of [a-z0-9_], starting with a letter")
            } else if !keys.insert(definition.key).inserted {
                bad("key", "DUPLICATE", "keys are unique in a community")
            }
            if let violation = Self.labelViolation(definition.label, field: "\(at).label") { found.append(violation) }
            let isChoice = definition.attributeType == .singleChoice || definition.attributeType == .multiChoice
            switch definition.attributeType {
            case .text:
                if !(1...500).contains(definition.maxLength) { bad("max_length", "OUT_OF_RANGE", "1..500") }
            case .integer:
                if definition.minValue > definition.maxValue { bad("max_value", "OUT_OF_RANGE", ">= min_value") }
            case .bool, .singleChoice:
                break
            case .multiChoice:
                if !(1...max(1, definition.choices.count)).contains(Int(definition.maxChoices)) {
                    bad("max_choices", "OUT_OF_RANGE", "1..number of choices")
                }
            default:
                bad("attribute_type", "REQUIRED", "TEXT, INTEGER, BOOL, SINGLE_CHOICE or MULTI_CHOICE")
            }
            if isChoice {
                if !(1...200).contains(definition.choices.count) { bad("choices", "OUT_OF_RANGE", "1..200 choices") }
                var values = Set<String>()
                for (choiceIndex, choice) in definition.choices.enumerated() {
                    if !Self.isValidChoiceValue(choice.value) || !values.insert(choice.value).inserted {
                        bad("choices[\(choiceIndex)].value", "INVALID_FORMAT", "distinct, 1..64 characters of [a-z0-9_-]")
                    }
                    if let violation = Self.labelViolation(choice.label, field: "\(at).choices[\(choiceIndex)].label") {
                        found.append(violation)
                    }
                }
            } else if !definition.choices.isEmpty {
                bad("choices", "NOT_ALLOWED", "choices only for SINGLE_CHOICE and MULTI_CHOICE")
            }
        }
        return found
    }

    static func isValidAttributeKey(_ key: String) -> Bool {
        guard (1...32).contains(key.utf8.count), let first = key.utf8.first, first >= 97, first <= 122 else { return false }
        return key.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 95 }
    }

    static func isValidChoiceValue(_ value: String) -> Bool {
        (1...64).contains(value.utf8.count)
            && value.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 95 || $0 == 45 }
    }

    /// A community's display name breaks `TextRule.communityName`, or is not stored trimmed.
    static func displayNameViolation(_ name: String) -> Violation? {
        do throws(TextViolation) {
            let stored = try TextRule.communityName.validate(name, field: "display_name")
            return stored == name ? nil : ProfileError.violation("display_name", "INVALID_FORMAT", "trimmed")
        } catch {
            return error.fieldViolation
        }
    }

    /// A label breaks `TextRule.label` (labels are stored as given: trimming is the admin's tool's work).
    static func labelViolation(_ label: String, field: String) -> Violation? {
        do throws(TextViolation) {
            _ = try TextRule.label.validate(label, field: field)
            return nil
        } catch {
            return error.fieldViolation
        }
    }

    /// UpdateCommunity: `current` with the named paths taken from the request; throws INVALID_ARGUMENT for
    /// unknown or repeated paths, broken rules, or a changed type of an existing attribute key.
    static func applying(
        paths: [String],
        displayName: String,
        settings input: Settings,
        to current: Kindred.Common.V1.Community
    ) throws(ProfileError) -> Kindred.Common.V1.Community {
        guard (1...20).contains(paths.count), Set(paths).count == paths.count else {
            throw ProfileError.invalid("update_paths", "OUT_OF_RANGE", "1..20 distinct paths")
        }
        var community = current
        var settings = current.settings ?? Settings()
        for path in paths {
            if path == "display_name" {
                if let violation = Self.displayNameViolation(displayName) { throw ProfileError.invalid([violation]) }
                community.displayName = displayName
                continue
            }
            guard path.hasPrefix("settings."), Self.settingsPaths.contains(String(path.dropFirst("settings.".count)))
            else {
                throw ProfileError.invalid("update_paths", "UNKNOWN_PATH", "display_name or settings.<field>")
            }
            switch String(path.dropFirst("settings.".count)) {
            case "mode": settings.mode = input.mode
            case "required_profile_fields": settings.requiredProfileFields = input.requiredProfileFields
            case "attribute_definitions":
                let old = Dictionary(
                    current.settings?.attributeDefinitions.map { ($0.key, $0.attributeType) } ?? [],
                    uniquingKeysWith: { first, _ in first })
                for (index, definition) in input.attributeDefinitions.enumerated() {
                    if let type = old[definition.key], type != definition.attributeType {
                        throw ProfileError.invalid(
                            "settings.attribute_definitions[\(index)].attribute_type", "IMMUTABLE",
                            "the type of an existing key cannot change: remove the key, then add it again")
                    }
                }
                settings.attributeDefinitions = Self.withDefaults(
                    .with { $0.attributeDefinitions = input.attributeDefinitions }
                ).attributeDefinitions
            case "min_photos": settings.minPhotos = input.minPhotos
            case "max_photos": settings.maxPhotos = input.maxPhotos
            case "min_age_years": settings.minAgeYears = input.minAgeYears
            case "default_radius_km": settings.defaultRadiusKm = input.defaultRadiusKm
            case "max_radius_km": settings.maxRadiusKm = input.maxRadiusKm
            case "gender_matching": settings.genderMatching = input.genderMatching
            case "daily_like_limit": settings.dailyLikeLimit = input.dailyLikeLimit
            case "undo_window_seconds": settings.undoWindowSeconds = input.undoWindowSeconds
            case "daily_undo_limit": settings.dailyUndoLimit = input.dailyUndoLimit
            case "hourly_message_limit": settings.hourlyMessageLimit = input.hourlyMessageLimit
            case "sign_up_open": settings.signUpOpen = input.signUpOpen
            default: break
            }
        }
        let violations = Self.violations(settings)
        guard violations.isEmpty else { throw ProfileError.invalid(violations) }
        community.settings = settings
        return community
    }
}
