import Foundation
import KindredProto
import KindredServiceKit

/// What discovery keeps of a community's configuration (profile's CommunityUpdated): radii and which
/// attributes are filterable, ranking features or text. Until the event arrives, the contract's defaults.
public struct CommunityRules: Sendable, Equatable {
    public var defaultRadiusKm: Int = 50
    public var maxRadiusKm: Int = 160
    /// Filterable attribute keys and their types (SearchMembers and deck filters accept only these).
    public var filterable: [String: Kindred.Common.V1.AttributeType] = [:]
    /// Ranking-feature attribute keys ("shares this value" is a signal).
    public var ranking: Set<String> = []
    public var version: Int64 = 0

    public init() {}

    public init(_ community: Kindred.Common.V1.Community) {
        let settings = community.settings ?? Kindred.Common.V1.CommunitySettings()
        if settings.defaultRadiusKm > 0 { self.defaultRadiusKm = Int(settings.defaultRadiusKm) }
        if settings.maxRadiusKm > 0 { self.maxRadiusKm = max(Int(settings.maxRadiusKm), self.defaultRadiusKm) }
        for definition in settings.attributeDefinitions {
            if definition.filterable { self.filterable[definition.key] = definition.attributeType }
            if definition.rankingFeature { self.ranking.insert(definition.key) }
        }
        self.version = community.version
    }
}

/// The facts of one member that filters and search need beyond the index's bits: filterable attribute
/// values and the words of text attributes.
public struct MemberFacts: Sendable, Equatable {
    public var values: [String: Kindred.Common.V1.AttributeValue.Value]
    /// Lower-cased words of TEXT attributes (SearchMembers' query).
    public var words: Set<String>

    /// No filterable values and no words (not stored).
    public var isEmpty: Bool { self.values.isEmpty && self.words.isEmpty }

    public init(values: [String: Kindred.Common.V1.AttributeValue.Value] = [:], words: Set<String> = []) {
        self.values = values
        self.words = words
    }
}

/// Turns a profile snapshot into what the index holds (DESIGN §5: the cell centre, never more).
public enum MemberBuilder {
    /// Why a snapshot is not indexed.
    public enum Absence: Error, Equatable, Sendable {
        case ineligible
        case noLocation
    }

    /// The index entry and filter facts of an eligible snapshot with a location, else why not. `offset`: how
    /// positions are published (nil only in tests and benchmarks that measure the plain cell centres).
    public static func member(
        _ snapshot: Kindred.Common.V1.CandidateSnapshot,
        rules: CommunityRules,
        user: UserKey,
        offset: LocationOffset?
    ) -> Result<(IndexedMember, MemberFacts), Absence> {
        guard snapshot.eligible else { return .failure(.ineligible) }
        guard snapshot.geohashCell.count == 6, let cell = Geohash.decode(snapshot.geohashCell) else {
            return .failure(.noLocation)
        }
        // The published position (DESIGN §5): the cell displaced by the member's secret offset (nil: the cell).
        let centre = offset?.published(user: user, latitude: cell.latitude, longitude: cell.longitude) ?? cell
        var interestWords: [String] = []
        var attributeWords: [String] = []
        var facts = MemberFacts()
        for attribute in snapshot.attributes {
            guard let value = attribute.value else { continue }
            let words: [String]
            switch value {
            case .textValue(let text):
                words = []
                for word in Self.words(text) { facts.words.insert(word) }
            case .integerValue(let number): words = ["\(number)"]
            case .boolValue(let flag): words = [flag ? "true" : "false"]
            case .choiceValue(let choice): words = [choice]
            case .choiceValues(let list): words = list.values
            }
            if rules.filterable[attribute.key] != nil { facts.values[attribute.key] = value }
            let pairs = words.map { "\(attribute.key)=\($0)" }
            if case .choiceValues = value { interestWords += pairs }
            if rules.ranking.contains(attribute.key) || rules.filterable[attribute.key] != nil { attributeWords += pairs }
        }
        var wanted: UInt8 = 0
        for gender in snapshot.interestedIn { wanted |= Self.genderBit(gender) }
        let birth = snapshot.birthDate ?? Kindred.Common.V1.CalendarDate()
        let member = IndexedMember(
            user: user,
            latitude: centre.latitude,
            longitude: centre.longitude,
            gender: Self.genderCode(snapshot.gender),
            interestedIn: wanted,
            birthDate: birth.year * 10000 + birth.month * 100 + birth.day,
            ageMin: UInt8(clamping: snapshot.ageMinYears > 0 ? snapshot.ageMinYears : 18),
            ageMax: UInt8(clamping: snapshot.ageMaxYears > 0 ? snapshot.ageMaxYears : 120),
            radiusKm: UInt16(clamping: snapshot.maxDistanceKm > 0 ? Int(snapshot.maxDistanceKm) : rules.defaultRadiusKm),
            hideDistance: snapshot.hideDistance,
            interests: InterestSet(words: interestWords),
            attributes: InterestSet(words: attributeWords),
            lastActiveMinutes: Int32(clamping: snapshot.updatedUnixMs / 60_000),
            joinedMinutes: Int32(clamping: snapshot.updatedUnixMs / 60_000)
        )
        return .success((member, facts))
    }

    /// Gender codes below 8 as the index keeps them (0 = unspecified).
    static func genderCode(_ gender: Kindred.Common.V1.Gender) -> UInt8 {
        let raw = gender.rawValue
        return raw > 0 && raw < 8 ? UInt8(raw) : 0
    }

    static func genderBit(_ gender: Kindred.Common.V1.Gender) -> UInt8 {
        let code = genderCode(gender)
        return code == 0 ? 0 : 1 << code
    }

    /// Lower-cased words of letters and digits.
    public static func words(_ text: String) -> [String] {
        text.lowercased().split { !$0.isLetter && !$0.isNumber }.map(String.init)
    }
}

/// Attribute filters checked against a community's rules, then applied to members' facts.
public struct AttributeFilterSet: Sendable {
    public enum Problem: Error, Equatable {
        case tooMany
        case notFilterable(index: Int)
        case badCondition(index: Int)
    }

    let filters: [Kindred.Common.V1.AttributeFilter]

    /// Validates at most 10 filters: each on a filterable attribute, with the condition its type takes.
    public init(_ filters: [Kindred.Common.V1.AttributeFilter], rules: CommunityRules) throws(Problem) {
        guard filters.count <= 10 else { throw .tooMany }
        for (index, filter) in filters.enumerated() {
            guard let type = rules.filterable[filter.key] else { throw .notFilterable(index: index) }
            switch (filter.condition, type) {
            case (.anyOf(let list)?, .singleChoice), (.anyOf(let list)?, .multiChoice):
                guard (1...50).contains(list.values.count) else { throw .badCondition(index: index) }
            case (.integerRange(let range)?, .integer):
                guard range.minInclusive <= range.maxInclusive else { throw .badCondition(index: index) }
            case (.boolEquals?, .bool): break
            default: throw .badCondition(index: index)
            }
        }
        self.filters = filters
    }

    public var isEmpty: Bool { self.filters.isEmpty }

    /// Whether a member's facts pass every filter (a member without a value fails a filter on it).
    public func accepts(_ facts: MemberFacts) -> Bool {
        for filter in self.filters {
            guard let value = facts.values[filter.key] else { return false }
            switch (filter.condition, value) {
            case (.anyOf(let list)?, .choiceValue(let choice)):
                guard list.values.contains(choice) else { return false }
            case (.anyOf(let list)?, .choiceValues(let chosen)):
                guard chosen.values.contains(where: list.values.contains) else { return false }
            case (.integerRange(let range)?, .integerValue(let number)):
                guard number >= range.minInclusive, number <= range.maxInclusive else { return false }
            case (.boolEquals(let wanted)?, .boolValue(let flag)):
                guard wanted == flag else { return false }
            default: return false
            }
        }
        return true
    }
}

extension LocationOffset {
    /// The displacement of `user` (see ``LocationOffset/displacement(high:low:)``).
    public func displacement(of user: UserKey) -> (bearing: Double, kilometres: Double) {
        self.displacement(high: user.high, low: user.low)
    }

    /// The published cell centre of `user` whose cell's centre is (`latitude`, `longitude`).
    public func published(user: UserKey, latitude: Double, longitude: Double) -> (latitude: Double, longitude: Double) {
        self.published(high: user.high, low: user.low, latitude: latitude, longitude: longitude)
    }
}
