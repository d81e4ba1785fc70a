import Foundation
import KindredProto
import KindredServiceKit

/// The rules of profile fields as values: validation with field violations, interest normalisation, attribute
/// values against the community's definitions, ages, update paths and eligibility. No I/O; tested by tables in
/// `ProfileRulesTests`.
public enum ProfileRules {
    typealias Fields = Kindred.Profile.V1.ProfileFields
    typealias Violation = Kindred.Common.V1.FieldViolation
    typealias Settings = Kindred.Common.V1.CommunitySettings

    public static let maxInterests = 10
    /// All fields together, encoded: each field has its own cap, but their sum could still reach about half a
    /// megabyte (32 text attributes of 2,000 bytes, long multi-choice lists), and a deck page carries 50 cards.
    /// 16 KiB holds a full bio, name, job, city, ten interests and a dozen long attributes; the page arithmetic
    /// is in services/README.md ("Limits").
    public static let maxFieldsBytes = CardPage.maxProfileFieldsBytes

    /// Paths UpdateProfile accepts (plus "attributes.<key>"). "display_name" and "birth_date" are immutable.
    public static let updatablePaths: Set<String> = [
        "gender", "interested_in", "bio", "attributes", "age_min_years", "age_max_years", "max_distance_km", "paused",
        "hide_distance", "interests", "job_title", "city",
    ]
    public static let immutablePaths: Set<String> = ["display_name", "birth_date"]

    // MARK: Single fields

    /// One interest normalised: trimmed, lower-cased, one word of letters, digits or '-' within
    /// `TextRule.interest` (24 characters, 96 bytes); nil if not one.
    public static func normalizedInterest(_ raw: String) -> String? {
        // Checked again after lower-casing, which can lengthen a word ("İ" becomes "i" and a combining dot).
        guard let word = (try? TextRule.interest.validate(raw, field: ""))?.lowercased(),
            (try? TextRule.interest.validate(word, field: "")) == word,
            word.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" })
        else { return nil }
        return word
    }

    /// Interests normalised and deduplicated (first occurrence kept); INVALID_ARGUMENT naming the first bad one
    /// or too many.
    static func normalizedInterests(_ raw: [String]) throws(ProfileError) -> [String] {
        var seen = Set<String>()
        var result: [String] = []
        for (index, interest) in raw.enumerated() {
            guard let word = Self.normalizedInterest(interest) else {
                throw ProfileError.invalid(
                    "fields.interests[\(index)]", "INVALID_FORMAT", "one word of 1..24 letters, digits or '-'")
            }
            if seen.insert(word).inserted { result.append(word) }
        }
        guard result.count <= Self.maxInterests else {
            throw ProfileError.invalid("fields.interests", "TOO_MANY", "at most 10 distinct interests")
        }
        return result
    }

    /// Whole years between `birth` and `today` (UTC calendar dates); nil for an impossible date.
    public static func age(of birth: Kindred.Common.V1.CalendarDate, on today: Kindred.Common.V1.CalendarDate) -> Int? {
        guard Self.isValidDate(birth) else { return nil }
        var years = Int(today.year - birth.year)
        if (today.month, today.day) < (birth.month, birth.day) { years -= 1 }
        return years
    }

    static func isValidDate(_ date: Kindred.Common.V1.CalendarDate) -> Bool {
        guard (1900...9999).contains(date.year), (1...12).contains(date.month), date.day >= 1 else { return false }
        let leap = (date.year % 4 == 0 && date.year % 100 != 0) || date.year % 400 == 0
        let days: [Int32] = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        return date.day <= days[Int(date.month) - 1]
    }

    /// Today's UTC calendar date.
    static func today(_ now: Date = Date()) -> Kindred.Common.V1.CalendarDate {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day], from: now)
        return .with {
            $0.year = Int32(parts.year!)
            $0.month = Int32(parts.month!)
            $0.day = Int32(parts.day!)
        }
    }

    // MARK: Attributes

    /// Every rule `value` breaks against its community's definitions, as violations at `field`.
    static func attributeViolations(
        _ value: Kindred.Common.V1.AttributeValue,
        definitions: [String: Kindred.Common.V1.AttributeDefinition],
        field: String
    ) -> [Violation] {
        guard let definition = definitions[value.key] else {
            return [ProfileError.violation("\(field).key", "UNKNOWN_ATTRIBUTE", "not an attribute of this community")]
        }
        func bad(_ reason: String, _ hint: String) -> [Violation] {
            [ProfileError.violation("\(field)", reason, hint)]
        }
        switch (definition.attributeType, value.value) {
        case (.text, .textValue(let text)?):
            do throws(TextViolation) {
                _ = try TextRule.attributeText(maxLength: Int(definition.maxLength)).validate(text, field: field)
            } catch {
                return [error.fieldViolation]
            }
        case (.integer, .integerValue(let number)?):
            if !(definition.minValue...definition.maxValue).contains(number) {
                return bad("OUT_OF_RANGE", "\(definition.minValue)..\(definition.maxValue)")
            }
        case (.bool, .boolValue?):
            break
        case (.singleChoice, .choiceValue(let choice)?):
            if !definition.choices.contains(where: { $0.value == choice }) { return bad("UNKNOWN_CHOICE", "one of the choices") }
        case (.multiChoice, .choiceValues(let list)?):
            let allowed = Set(definition.choices.map(\.value))
            if list.values.isEmpty || list.values.count > Int(definition.maxChoices)
                || Set(list.values).count != list.values.count || !list.values.allSatisfy(allowed.contains)
            {
                return bad("UNKNOWN_CHOICE", "1..\(definition.maxChoices) distinct choices")
            }
        default:
            return bad("WRONG_TYPE", "the value must match the attribute's type")
        }
        return []
    }

    /// Attribute values validated (text trimmed), one per key.
    static func validatedAttributes(
        _ values: [Kindred.Common.V1.AttributeValue],
        settings: Settings,
        field: String = "fields.attributes"
    ) throws(ProfileError) -> [Kindred.Common.V1.AttributeValue] {
        let definitions = Dictionary(settings.attributeDefinitions.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
        var violations: [Violation] = []
        var keys = Set<String>()
        var result: [Kindred.Common.V1.AttributeValue] = []
        for (index, value) in values.enumerated() {
            if !keys.insert(value.key).inserted {
                violations.append(ProfileError.violation("\(field)[\(index)].key", "DUPLICATE", "one value per key"))
                continue
            }
            violations += Self.attributeViolations(value, definitions: definitions, field: "\(field)[\(index)]")
            var clean = value
            if case .textValue(let text)? = value.value { clean.value = .textValue(TextRule.trimmed(text)) }
            result.append(clean)
        }
        guard violations.isEmpty else { throw ProfileError.invalid(violations) }
        return result
    }

    // MARK: Whole fields

    /// The fields as stored after validation (for CreateProfile all of them; for UpdateProfile the merged result).
    /// Throws INVALID_ARGUMENT with every broken field rule; age rules are `checkAge`.
    static func validated(_ input: Fields, settings: Settings) throws(ProfileError) -> Fields {
        var fields = input
        var violations: [Violation] = []
        func check(_ ok: Bool, _ field: String, _ reason: String, _ hint: String) {
            if !ok { violations.append(ProfileError.violation("fields.\(field)", reason, hint)) }
        }
        func text(_ rule: TextRule, _ raw: String, _ field: String) -> String {
            do throws(TextViolation) {
                return try rule.validate(raw, field: "fields.\(field)")
            } catch {
                violations.append(error.fieldViolation)
                return raw
            }
        }
        fields.displayName = text(.displayName, input.displayName, "display_name")
        check(input.birthDate.map(Self.isValidDate) ?? false, "birth_date", "INVALID_DATE", "a real calendar date")
        check(Self.isKnownGender(input.gender, allowUnspecified: true), "gender", "OUT_OF_RANGE", "a known gender")
        check(
            input.interestedIn.count <= 3 && Set(input.interestedIn).count == input.interestedIn.count
                && input.interestedIn.allSatisfy { Self.isKnownGender($0, allowUnspecified: false) },
            "interested_in", "OUT_OF_RANGE", "0..3 distinct genders")
        fields.bio = text(.bio, input.bio, "bio")
        fields.jobTitle = text(.jobOrCity, input.jobTitle, "job_title")
        fields.city = text(.jobOrCity, input.city, "city")
        let minimumAge = settings.minAgeYears
        check(
            input.ageMinYears == 0 || (minimumAge...120).contains(input.ageMinYears), "age_min_years", "OUT_OF_RANGE",
            "0 or \(minimumAge)..120")
        let effectiveMin = input.ageMinYears == 0 ? minimumAge : input.ageMinYears
        // Compared, not built as a range: an age_min_years above 120 (refused above) must not trap here.
        check(
            input.ageMaxYears == 0 || (effectiveMin <= input.ageMaxYears && input.ageMaxYears <= 120),
            "age_max_years", "OUT_OF_RANGE", "0 or age_min_years..120")
        check(
            input.maxDistanceKm == 0 || (1...settings.maxRadiusKm).contains(input.maxDistanceKm), "max_distance_km",
            "OUT_OF_RANGE", "0 or 1..\(settings.maxRadiusKm)")
        do throws(ProfileError) {
            fields.interests = try Self.normalizedInterests(input.interests)
        } catch {
            violations += error.violations
        }
        do throws(ProfileError) {
            fields.attributes = try Self.validatedAttributes(input.attributes, settings: settings)
        } catch {
            violations += error.violations
        }
        guard violations.isEmpty else { throw ProfileError.invalid(violations) }
        guard let encoded = try? fields.serializedBytes(), encoded.count <= Self.maxFieldsBytes else {
            throw ProfileError.invalid(
                "fields", "TOO_MANY_BYTES", "all fields together at most \(Self.maxFieldsBytes) bytes")
        }
        return fields
    }

    static func isKnownGender(_ gender: Kindred.Common.V1.Gender, allowUnspecified: Bool) -> Bool {
        switch gender {
        case .woman, .man, .nonbinary: true
        case .unspecified: allowUnspecified
        default: false
        }
    }

    /// FAILED_PRECONDITION BELOW_MINIMUM_AGE unless the birth date gives at least the community's minimum age.
    static func checkAge(_ birth: Kindred.Common.V1.CalendarDate, settings: Settings, today: Kindred.Common.V1.CalendarDate)
        throws(ProfileError)
    {
        guard let age = Self.age(of: birth, on: today), age >= Int(settings.minAgeYears) else {
            throw ProfileError(.failedPrecondition, "BELOW_MINIMUM_AGE", "Below the community's minimum age")
        }
        guard age <= 120 else { throw ProfileError.invalid("fields.birth_date", "OUT_OF_RANGE", "age at most 120") }
    }

    /// UpdateProfile: `current` with the named paths taken from `input`. Immutable paths are FAILED_PRECONDITION
    /// IMMUTABLE_FIELD (unless `admin` and the path is birth_date); unknown or repeated paths INVALID_ARGUMENT.
    /// Returns the merged fields (not yet validated) and the paths that changed.
    static func merge(
        paths: [String],
        input: Fields,
        into current: Fields,
        admin: Bool
    ) throws(ProfileError) -> (fields: Fields, changed: [String]) {
        guard (1...20).contains(paths.count), Set(paths).count == paths.count else {
            throw ProfileError.invalid("update_paths", "OUT_OF_RANGE", "1..20 distinct paths")
        }
        var fields = current
        for path in paths {
            switch path {
            case "birth_date" where admin: fields.birthDate = input.birthDate
            case _ where Self.immutablePaths.contains(path):
                throw ProfileError(
                    .failedPrecondition, "IMMUTABLE_FIELD", "\(path) cannot change after the profile was created")
            case "gender": fields.gender = input.gender
            case "interested_in": fields.interestedIn = input.interestedIn
            case "bio": fields.bio = input.bio
            case "attributes": fields.attributes = input.attributes
            case "age_min_years": fields.ageMinYears = input.ageMinYears
            case "age_max_years": fields.ageMaxYears = input.ageMaxYears
            case "max_distance_km": fields.maxDistanceKm = input.maxDistanceKm
            case "paused": fields.paused = input.paused
            case "hide_distance": fields.hideDistance = input.hideDistance
            case "interests": fields.interests = input.interests
            case "job_title": fields.jobTitle = input.jobTitle
            case "city": fields.city = input.city
            case _ where path.hasPrefix("attributes.") && path.count > "attributes.".count:
                let key = String(path.dropFirst("attributes.".count))
                fields.attributes.removeAll { $0.key == key }
                if let value = input.attributes.first(where: { $0.key == key }) { fields.attributes.append(value) }
            default:
                throw ProfileError.invalid("update_paths", "UNKNOWN_PATH", "one of the updatable paths")
            }
        }
        return (fields, paths.filter { Self.differs($0, current, fields) })
    }

    private static func differs(_ path: String, _ a: Fields, _ b: Fields) -> Bool {
        var left = a
        var right = b
        // Compare through the encoded messages restricted to the path: cheap and exact enough.
        if path.hasPrefix("attributes.") {
            let key = String(path.dropFirst("attributes.".count))
            return a.attributes.first { $0.key == key } != b.attributes.first { $0.key == key }
        }
        left = Self.only(path, left)
        right = Self.only(path, right)
        return left != right
    }

    private static func only(_ path: String, _ fields: Fields) -> Fields {
        var kept = Fields()
        switch path {
        case "birth_date": kept.birthDate = fields.birthDate
        case "gender": kept.gender = fields.gender
        case "interested_in": kept.interestedIn = fields.interestedIn
        case "bio": kept.bio = fields.bio
        case "attributes": kept.attributes = fields.attributes
        case "age_min_years": kept.ageMinYears = fields.ageMinYears
        case "age_max_years": kept.ageMaxYears = fields.ageMaxYears
        case "max_distance_km": kept.maxDistanceKm = fields.maxDistanceKm
        case "paused": kept.paused = fields.paused
        case "hide_distance": kept.hideDistance = fields.hideDistance
        case "interests": kept.interests = fields.interests
        case "job_title": kept.jobTitle = fields.jobTitle
        case "city": kept.city = fields.city
        default: break
        }
        return kept
    }

    /// Attribute values whose key the community no longer defines are dropped (a removed definition).
    static func keepingDefined(_ fields: Fields, settings: Settings) -> Fields {
        var kept = fields
        let keys = Set(settings.attributeDefinitions.map(\.key))
        kept.attributes.removeAll { !keys.contains($0.key) }
        return kept
    }

    // MARK: Eligibility

    /// What is missing for the profile to be shown to others, in the contract's names; empty = complete.
    static func missingRequirements(
        _ fields: Fields,
        settings: Settings,
        photoCount: Int,
        locationSet: Bool
    ) -> [String] {
        var missing: [String] = []
        if fields.displayName.isEmpty { missing.append("display_name") }
        if fields.birthDate == nil { missing.append("birth_date") }
        for field in settings.requiredProfileFields {
            switch field {
            case "bio" where fields.bio.isEmpty: missing.append("bio")
            case "gender" where settings.genderMatching && fields.gender == .unspecified: missing.append("gender")
            case "interested_in" where settings.genderMatching && fields.interestedIn.isEmpty:
                missing.append("interested_in")
            case "location" where !locationSet: missing.append("location")
            default: break
            }
        }
        if photoCount < Int(settings.minPhotos) { missing.append("photos") }
        let present = Set(fields.attributes.map(\.key))
        for definition in settings.attributeDefinitions where definition.required && !present.contains(definition.key) {
            missing.append("attributes.\(definition.key)")
        }
        return missing
    }
}
