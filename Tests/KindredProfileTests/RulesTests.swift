import Foundation
import KindredGRPC
import KindredGeo
import KindredMediaURL
@testable import KindredProfile
import KindredProto
import KindredServiceKit
import Testing

@Suite struct GeohashTests {
    @Test(arguments: [
        (57.64911, 10.40744, 11, "u4pruydqqvj"),
        (42.6, -5.6, 5, "ezs42"),
        (48.8583, 2.2945, 7, "u09tunq"),
        (-33.8568, 151.2153, 6, "r3gx2u"),
        (0.0, 0.0, 1, "s"),
    ])
    func encodesKnownCells(latitude: Double, longitude: Double, precision: Int, cell: String) {
        #expect(Geohash.encode(latitude: latitude, longitude: longitude, precision: precision) == cell)
        let bounds = Geohash.bounds(cell)!
        #expect(bounds.latitude.contains(latitude) && bounds.longitude.contains(longitude))
    }

    @Test(arguments: [
        (Double.nan, 0.0), (0.0, Double.nan), (Double.infinity, 0.0), (0.0, -Double.infinity), (90.0001, 0.0),
        (-90.5, 0.0), (0.0, 180.01), (0.0, -181.0),
    ])
    func refusesInvalidPoints(latitude: Double, longitude: Double) {
        #expect(Geohash.encode(latitude: latitude, longitude: longitude, precision: 7) == nil)
    }

    @Test func decodesInvalidTextToNil() {
        #expect(Geohash.decode("") == nil)
        #expect(Geohash.decode("abc") == nil)  // 'a' is not in the alphabet
        #expect(Geohash.decode(String(repeating: "u", count: 13)) == nil)
    }
}

@Suite struct LocationRulesTests {
    let rules = LocationRules()
    let paris = (48.8566, 2.3522)

    @Test(arguments: [
        (Double.nan, 0.0, "location.latitude_deg"), (91.0, 0.0, "location.latitude_deg"),
        (0.0, Double.infinity, "location.longitude_deg"), (0.0, -180.5, "location.longitude_deg"),
    ])
    func invalidPoints(latitude: Double, longitude: Double, field: String) {
        #expect(rules.decide(latitude: latitude, longitude: longitude, previous: nil, nowUnixMilliseconds: 0) == .invalid(field: field))
    }

    @Test func snapsToSevenCharactersAtOnce() {
        guard case .accept(let cell, let changed) = rules.decide(
            latitude: paris.0, longitude: paris.1, previous: nil, nowUnixMilliseconds: 1000)
        else { Issue.record("not accepted"); return }
        #expect(cell.count == 7 && changed)
    }

    @Test func tooSoonAndImplausibleJump() {
        let cell = Geohash.encode(latitude: paris.0, longitude: paris.1, precision: 7)!
        let previous = LocationRules.Previous(cell: cell, unixMilliseconds: 1_000_000)
        #expect(
            rules.decide(latitude: paris.0, longitude: paris.1, previous: previous, nowUnixMilliseconds: 1_030_000)
                == .tooSoon(retryAtUnixMilliseconds: 1_060_000))
        // Paris → New York in 10 minutes: refused; in 10 hours: accepted.
        #expect(
            rules.decide(latitude: 40.71, longitude: -74.0, previous: previous, nowUnixMilliseconds: 1_000_000 + 600_000)
                == .implausibleJump)
        guard case .accept(_, let changed) = rules.decide(
            latitude: 40.71, longitude: -74.0, previous: previous, nowUnixMilliseconds: 1_000_000 + 36_000_000)
        else { Issue.record("not accepted"); return }
        #expect(changed)
        // A few metres later: accepted, same shared cell.
        guard case .accept(_, let same) = rules.decide(
            latitude: paris.0 + 0.0001, longitude: paris.1, previous: previous, nowUnixMilliseconds: 1_000_000 + 61_000)
        else { Issue.record("not accepted"); return }
        #expect(!same)
    }
}

@Suite struct ProfileRulesTests {
    let settings = CommunityPresets.dating.settings!
    let bizmatch = CommunityPresets.bizmatch.settings!

    func fields(_ change: (inout V1.ProfileFields) -> Void) -> V1.ProfileFields {
        var fields = ProfileHarness.fields()
        change(&fields)
        return fields
    }

    /// The first violation's field and reason, nil when valid.
    func violation(_ fields: V1.ProfileFields, _ settings: Kindred.Common.V1.CommunitySettings? = nil) -> String? {
        do {
            _ = try ProfileRules.validated(fields, settings: settings ?? self.settings)
            return nil
        } catch {
            return error.violations.first.map { "\($0.field) \($0.reason)" }
        }
    }

    @Test func bioCountsCharactersAndBytes() {
        let family = "👨‍👩‍👧‍👦"  // one Character, 7 scalars, 25 UTF-8 bytes
        #expect(violation(fields { $0.bio = String(repeating: family, count: 80) }) == nil)  // 2,000 bytes
        #expect(violation(fields { $0.bio = String(repeating: family, count: 81) }) == "fields.bio TOO_MANY_BYTES")
        // The reported bio: one character of 20,000 combining marks (40 KB).
        let tower = "a" + String(repeating: "\u{0301}", count: 20_000)
        #expect(violation(fields { $0.bio = tower }) == "fields.bio TOO_MANY_BYTES")
        #expect(violation(fields { $0.bio = String(repeating: "é", count: 501) }) == "fields.bio TOO_LONG")
        #expect(violation(fields { $0.bio = "line one\r\nline two" }) == nil)
        #expect(violation(fields { $0.bio = "bell\u{7}" }) == "fields.bio FORBIDDEN_CHARACTER")
    }

    @Test func allFieldsTogetherHaveAByteCap() {
        var settings = self.settings
        settings.attributeDefinitions = (0..<10).map { index in
            .with {
                $0.key = "t\(index)"
                $0.label = "T"
                $0.attributeType = .text
                $0.maxLength = 500
            }
        }
        let long = String(repeating: "😀", count: 500)  // 2,000 bytes: within the attribute's own caps
        let values = (0..<10).map { Self.value("t\($0)", .textValue(long)) }
        #expect(violation(fields { $0.attributes = Array(values.prefix(7)) }, settings) == nil)  // 14 KB
        #expect(violation(fields { $0.attributes = values }, settings) == "fields TOO_MANY_BYTES")  // 20 KB
    }

    @Test(arguments: [
        (["Hiking", " hiking ", "DOGS", "dogs"], ["hiking", "dogs"]),
        (["café", "k-pop", "Ski"], ["café", "k-pop", "ski"]),
    ])
    func interestsAreNormalised(raw: [String], expected: [String]) throws {
        #expect(try ProfileRules.normalizedInterests(raw) == expected)
    }

    @Test(arguments: [["two words"], ["a!"], [""], [String(repeating: "x", count: 25)], (0..<11).map { "i\($0)" }])
    func badInterestsAreRefused(raw: [String]) {
        #expect(throws: ProfileError.self) { try ProfileRules.normalizedInterests(raw) }
    }

    @Test func duplicatesDoNotCountTowardsTheLimit() throws {
        #expect(try ProfileRules.normalizedInterests((0..<10).map { "i\($0)" } + ["I0", "i1"]).count == 10)
    }

    @Test func fieldRules() {
        #expect(violation(fields { $0.displayName = "  " }) == "fields.display_name REQUIRED")
        #expect(violation(fields { $0.displayName = String(repeating: "n", count: 51) }) == "fields.display_name TOO_LONG")
        #expect(violation(fields { $0.displayName = "Ada\u{202E}ecalevoL" }) == "fields.display_name FORBIDDEN_CHARACTER")
        #expect(violation(fields { $0.displayName = "A\u{200B}da" }) == "fields.display_name FORBIDDEN_CHARACTER")
        #expect(violation(fields { $0.city = "Paris\nLyon" }) == "fields.city FORBIDDEN_CHARACTER")
        #expect(violation(fields { $0.birthDate = ProfileHarness.date(1990, 2, 30) }) == "fields.birth_date INVALID_DATE")
        #expect(violation(fields { $0.interestedIn = [.man, .man] }) == "fields.interested_in OUT_OF_RANGE")
        #expect(violation(fields { $0.gender = .unrecognized(9) }) == "fields.gender OUT_OF_RANGE")
        #expect(violation(fields { $0.ageMinYears = 17 }) == "fields.age_min_years OUT_OF_RANGE")
        #expect(violation(fields { $0.ageMaxYears = 121 }) == "fields.age_max_years OUT_OF_RANGE")
        #expect(violation(fields { $0.ageMinYears = 121; $0.ageMaxYears = 30 }) == "fields.age_min_years OUT_OF_RANGE")
        #expect(violation(fields { $0.ageMinYears = 40; $0.ageMaxYears = 30 }) == "fields.age_max_years OUT_OF_RANGE")
        #expect(violation(fields { $0.maxDistanceKm = 161 }) == "fields.max_distance_km OUT_OF_RANGE")
        #expect(violation(fields { $0.jobTitle = String(repeating: "j", count: 65) }) == "fields.job_title TOO_LONG")
    }

    static func value(_ key: String, _ value: Kindred.Common.V1.AttributeValue.Value?) -> Kindred.Common.V1.AttributeValue {
        .with {
            $0.key = key
            $0.value = value
        }
    }

    @Test(arguments: [
        (value("role", .choiceValue("investor")), nil),
        (value("role", .choiceValue("pirate")), "UNKNOWN_CHOICE"),
        (value("role", .textValue("investor")), "WRONG_TYPE"),
        (value("years_experience", .integerValue(61)), "OUT_OF_RANGE"),
        (value("years_experience", .integerValue(12)), nil),
        (value("company", .textValue("  Acme  ")), nil),
        (value("company", .textValue(String(repeating: "c", count: 65))), "TOO_LONG"),
        (value("company", .textValue("c" + String(repeating: "\u{0301}", count: 200))), "TOO_MANY_BYTES"),
        (value("shoe_size", .integerValue(42)), "UNKNOWN_ATTRIBUTE"),
        (value("role", nil), "WRONG_TYPE"),
    ] as [(Kindred.Common.V1.AttributeValue, String?)])
    func attributesFollowDefinitions(value: Kindred.Common.V1.AttributeValue, reason: String?) {
        let found = violation(fields { $0.attributes = [value] }, bizmatch)
        #expect(found?.split(separator: " ").last.map(String.init) == reason)
    }

    @Test func multiChoiceLimits() {
        let playdates = CommunityPresets.playdates.settings!
        let three = Self.value("personality", .choiceValues(.with { $0.values = ["calm", "shy", "gentle"] }))
        let four = Self.value("personality", .choiceValues(.with { $0.values = ["calm", "shy", "gentle", "curious"] }))
        let repeated = Self.value("personality", .choiceValues(.with { $0.values = ["calm", "calm"] }))
        #expect(violation(fields { $0.attributes = [three] }, playdates) == nil)
        #expect(violation(fields { $0.attributes = [four] }, playdates) != nil)
        #expect(violation(fields { $0.attributes = [repeated] }, playdates) != nil)
    }

    @Test func ages() throws {
        let today = ProfileHarness.date(2026, 11, 24)
        #expect(ProfileRules.age(of: ProfileHarness.date(2008, 11, 24), on: today) == 18)
        #expect(ProfileRules.age(of: ProfileHarness.date(2008, 11, 25), on: today) == 17)
        #expect(ProfileRules.age(of: ProfileHarness.date(2000, 2, 29), on: today) == 26)
        #expect(throws: ProfileError(.failedPrecondition, "BELOW_MINIMUM_AGE", "Below the community's minimum age")) {
            try ProfileRules.checkAge(ProfileHarness.date(2008, 11, 25), settings: settings, today: today)
        }
        try ProfileRules.checkAge(ProfileHarness.date(2008, 11, 24), settings: settings, today: today)
    }

    @Test(arguments: ["display_name", "birth_date"])
    func immutableFields(path: String) {
        do {
            _ = try ProfileRules.merge(paths: [path], input: .init(), into: ProfileHarness.fields(), admin: false)
            Issue.record("accepted")
        } catch {
            #expect(error.code == ProfileError.Code(.failedPrecondition, reason: "IMMUTABLE_FIELD"))
        }
    }

    @Test func adminsMayCorrectTheBirthDateOnly() throws {
        let merged = try ProfileRules.merge(
            paths: ["birth_date"], input: fields { $0.birthDate = ProfileHarness.date(1980) },
            into: ProfileHarness.fields(), admin: true)
        #expect(merged.fields.birthDate == ProfileHarness.date(1980) && merged.changed == ["birth_date"])
        #expect(throws: ProfileError.self) {
            try ProfileRules.merge(paths: ["display_name"], input: .init(), into: ProfileHarness.fields(), admin: true)
        }
    }

    @Test(arguments: [[], ["bio", "bio"], ["nickname"], ["attributes."]])
    func badPaths(paths: [String]) {
        #expect(throws: ProfileError.self) {
            try ProfileRules.merge(paths: paths, input: .init(), into: ProfileHarness.fields(), admin: false)
        }
    }

    @Test func singleAttributePathSetsAndClears() throws {
        let role = Self.value("role", .choiceValue("startup"))
        let company = Self.value("company", .textValue("Acme"))
        let current = fields { $0.attributes = [role, company] }
        let cleared = try ProfileRules.merge(paths: ["attributes.company"], input: .init(), into: current, admin: false)
        #expect(cleared.fields.attributes == [role] && cleared.changed == ["attributes.company"])
        let set = try ProfileRules.merge(
            paths: ["attributes.role"], input: fields { $0.attributes = [Self.value("role", .choiceValue("investor"))] },
            into: current, admin: false)
        #expect(set.fields.attributes.count == 2 && set.changed == ["attributes.role"])
    }

    @Test func eligibilityFollowsTheCommunity() {
        var fields = ProfileHarness.fields()
        #expect(
            ProfileRules.missingRequirements(fields, settings: settings, photoCount: 0, locationSet: false)
                == ["gender", "interested_in", "photos"])
        fields.gender = .man
        fields.interestedIn = [.woman]
        #expect(ProfileRules.missingRequirements(fields, settings: settings, photoCount: 2, locationSet: false).isEmpty)
        #expect(
            ProfileRules.missingRequirements(fields, settings: bizmatch, photoCount: 1, locationSet: false)
                == ["bio", "attributes.business_field", "attributes.role"])
    }
}

@Suite struct CommunityRulesTests {
    @Test(arguments: CommunityPresets.all)
    func presetsAreValid(community: Kindred.Common.V1.Community) {
        #expect(CommunityRules.isValidID(community.communityId))
        #expect(CommunityRules.violations(community.settings!).isEmpty)
    }

    @Test func labelsAndSettingsHaveByteCaps() {
        let wide = String(repeating: "😀", count: 64)  // 64 characters, 256 bytes: the most a label takes
        func definition(_ index: Int, label: String = "Label") -> Kindred.Common.V1.AttributeDefinition {
            .with {
                $0.key = "k\(index)"
                $0.label = label
                $0.attributeType = .multiChoice
                $0.choices = (0..<200).map { choice in
                    .with {
                        $0.value = "choice-\(choice)"
                        $0.label = wide
                    }
                }
                $0.maxChoices = 3
            }
        }
        var settings = CommunityRules.withDefaults(.with { $0.mode = .mutual })
        settings.attributeDefinitions = [definition(0)]
        #expect(CommunityRules.violations(settings).isEmpty)
        settings.attributeDefinitions = [definition(0, label: wide + "!")]
        #expect(CommunityRules.violations(settings).map(\.reason) == ["TOO_LONG"])
        settings.attributeDefinitions = [definition(0, label: "L" + String(repeating: "\u{0301}", count: 200))]
        #expect(CommunityRules.violations(settings).map(\.reason) == ["TOO_MANY_BYTES"])
        settings.attributeDefinitions = (0..<32).map { definition($0) }  // each field within its caps: 1.7 MB
        #expect(CommunityRules.violations(settings).map(\.field) == ["settings"])
        #expect(CommunityRules.displayNameViolation("Dog\u{202E}s")?.reason == "FORBIDDEN_CHARACTER")
        #expect(CommunityRules.displayNameViolation(" Dogs")?.reason == "INVALID_FORMAT")
        #expect(CommunityRules.displayNameViolation("Dogs") == nil)
    }

    @Test func presetsAreTheFourApps() {
        #expect(CommunityPresets.all.map(\.communityId) == ["dating", "bizmatch", "playdates", "fitness"])
        #expect(CommunityPresets.dating.settings!.minPhotos == 2 && CommunityPresets.dating.settings!.genderMatching)
        #expect(CommunityPresets.bizmatch.settings!.defaultRadiusKm == 500)
        #expect(CommunityPresets.playdates.settings!.mode == .oneWay)
        #expect(CommunityPresets.fitness.settings!.mode == .oneWay)
    }

    @Test func defaultsFillZeroes() {
        let settings = CommunityRules.withDefaults(.with { $0.mode = .mutual })
        #expect(settings.minPhotos == 1 && settings.maxPhotos == 6 && settings.minAgeYears == 18)
        #expect(settings.defaultRadiusKm == 50 && settings.maxRadiusKm == 160 && settings.dailyLikeLimit == 200)
        #expect(CommunityRules.violations(settings).isEmpty)
    }

    @Test func violationsNameTheFields() {
        var settings = CommunityRules.withDefaults(.with { $0.mode = .mutual })
        settings.mode = .unspecified
        settings.minAgeYears = 12
        settings.maxRadiusKm = 10
        settings.requiredProfileFields = ["bio", "shoe_size"]
        settings.attributeDefinitions = [
            .with {
                $0.key = "Breed"
                $0.label = "Breed"
                $0.attributeType = .singleChoice
            },
            .with {
                $0.key = "size"
                $0.label = "Size"
                $0.attributeType = .text
                $0.maxLength = 10
                $0.choices = [.with { $0.value = "s"; $0.label = "S" }]
            },
        ]
        let fields = Set(CommunityRules.violations(settings).map(\.field))
        #expect(
            fields == [
                "settings.mode", "settings.min_age_years", "settings.max_radius_km", "settings.required_profile_fields",
                "settings.attribute_definitions[0].key", "settings.attribute_definitions[0].choices",
                "settings.attribute_definitions[1].choices",
            ])
    }

    @Test func updatePaths() throws {
        let dating = CommunityPresets.dating
        let renamed = try CommunityRules.applying(
            paths: ["display_name", "settings.min_photos"], displayName: "Dates", settings: .with { $0.minPhotos = 3 },
            to: dating)
        #expect(renamed.displayName == "Dates" && renamed.settings!.minPhotos == 3)
        #expect(throws: ProfileError.self) {
            try CommunityRules.applying(paths: ["settings.nope"], displayName: "", settings: .init(), to: dating)
        }
        #expect(throws: ProfileError.self) {
            try CommunityRules.applying(paths: ["settings.min_photos"], displayName: "", settings: .with { $0.minPhotos = 10 }, to: dating)
        }
        var changedType = CommunityPresets.bizmatch.settings!.attributeDefinitions
        changedType[2].attributeType = .text
        changedType[2].maxLength = 10
        #expect(throws: ProfileError.self) {
            try CommunityRules.applying(
                paths: ["settings.attribute_definitions"], displayName: "",
                settings: .with { $0.attributeDefinitions = changedType }, to: CommunityPresets.bizmatch)
        }
    }
}

@Suite struct MediaURLSignerTests {
    let signer = MediaURLSigner(key: Array(repeating: 7, count: 32))!
    let path = MediaURLSigner.Path(photoID: "0192f6e4-1111-7abc-8def-0123456789ab", version: 3, variant: 2, format: "webp")

    @Test func signsAndVerifies() {
        let expires = signer.expiry(now: 1_000_000)
        // Valid 15 to 20 minutes by default, the same URL for 5 minutes.
        #expect(expires >= 1_000_000 + 900 && expires < 1_000_000 + 1200 && expires % 300 == 0)
        let target = signer.sign(path, expires: expires)
        #expect(target.hasPrefix("/media/v1/0192f6e4-1111-7abc-8def-0123456789ab/3/2.webp?exp="))
        #expect(signer.verify(target, now: 1_000_000)?.path == path)
        #expect(signer.verify(target, now: expires) == nil)  // expired
        #expect(MediaURLSigner(key: Array(repeating: 8, count: 32))!.verify(target, now: 1_000_000) == nil)
        #expect(signer.verify(target.replacingOccurrences(of: "/3/", with: "/4/"), now: 1_000_000) == nil)
        #expect(signer.verify(target.replacingOccurrences(of: "exp=", with: "exp=9"), now: 1_000_000) == nil)
        #expect(signer.verify(target + "&x=1", now: 1_000_000) == nil)
        #expect(MediaURLSigner(key: [1, 2, 3]) == nil)
    }

    @Test(arguments: [
        "/media/v1/../../etc/passwd/1/2.jpeg", "/media/v1/0192f6e4-1111-7abc-8def-0123456789ab/0/2.jpeg",
        "/media/v1/0192f6e4-1111-7abc-8def-0123456789ab/1/9.jpeg", "/media/v1/0192f6e4-1111-7abc-8def-0123456789ab/1/2.gif",
        "/media/v2/0192f6e4-1111-7abc-8def-0123456789ab/1/2.jpeg",
    ])
    func refusesOtherPaths(text: String) {
        #expect(MediaURLSigner.Path(text) == nil)
    }
}

@Suite struct UploadURLSignerTests {
    let signer = MediaURLSigner(key: Array(repeating: 7, count: 32))!
    let path = MediaURLSigner.UploadPath(
        userID: "0192f6e4-1111-7abc-8def-0123456789ab", uploadID: "0192f6e4-2222-7abc-8def-0123456789ab", position: 2)

    @Test func signsAndVerifies() {
        let target = signer.sign(path, expires: 1_000_600)
        #expect(
            target.hasPrefix(
                "/upload/v1/0192f6e4-1111-7abc-8def-0123456789ab/0192f6e4-2222-7abc-8def-0123456789ab/2?exp=1000600&sig="))
        #expect(signer.verifyUpload(target, now: 1_000_000)?.path == path)
        #expect(signer.verifyUpload(target, now: 1_000_600) == nil)  // expired
        #expect(MediaURLSigner(key: Array(repeating: 8, count: 32))!.verifyUpload(target, now: 1_000_000) == nil)
        // Another member, another slot, a later expiry, extra or repeated query fields: the signature no longer holds.
        #expect(signer.verifyUpload(target.replacingOccurrences(of: "1111", with: "3333"), now: 1_000_000) == nil)
        #expect(signer.verifyUpload(target.replacingOccurrences(of: "/2?", with: "/3?"), now: 1_000_000) == nil)
        #expect(signer.verifyUpload(target.replacingOccurrences(of: "exp=", with: "exp=9"), now: 1_000_000) == nil)
        #expect(signer.verifyUpload(target + "&x=1", now: 1_000_000) == nil)
        #expect(signer.verifyUpload(target + "&exp=2000000", now: 1_000_000) == nil)
    }

    @Test func aPhotoSignatureIsNoUploadSignatureAndBackwards() {
        let photo = MediaURLSigner.Path(
            photoID: "0192f6e4-1111-7abc-8def-0123456789ab", version: 3, variant: 2, format: "webp")
        #expect(signer.verifyUpload(signer.sign(photo, expires: 1_000_600), now: 1_000_000) == nil)
        #expect(signer.verify(signer.sign(path, expires: 1_000_600), now: 1_000_000) == nil)
    }

    @Test(arguments: [
        "/upload/v1/0192f6e4-1111-7abc-8def-0123456789ab/0192f6e4-2222-7abc-8def-0123456789ab/02",
        "/upload/v1/0192f6e4-1111-7abc-8def-0123456789ab/0192f6e4-2222-7abc-8def-0123456789ab/+2",
        "/upload/v1/0192f6e4-1111-7abc-8def-0123456789ab/0192f6e4-2222-7abc-8def-0123456789ab/-1",
        "/upload/v1/0192f6e4-1111-7abc-8def-0123456789ab/0192f6e4-2222-7abc-8def-0123456789ab/1000",
        "/upload/v1/0192F6E4-1111-7abc-8def-0123456789ab/0192f6e4-2222-7abc-8def-0123456789ab/1",
        "/upload/v1/0192f6e4-1111-7abc-8def-0123456789ab/../1",
        "/upload/v2/0192f6e4-1111-7abc-8def-0123456789ab/0192f6e4-2222-7abc-8def-0123456789ab/1",
        "/upload/v1/0192f6e411117abc8def0123456789ab0000/0192f6e4-2222-7abc-8def-0123456789ab/1",
    ])
    func refusesOtherPaths(text: String) {
        #expect(MediaURLSigner.UploadPath(text) == nil)
    }
}
