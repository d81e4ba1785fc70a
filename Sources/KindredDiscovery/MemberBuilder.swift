import KindredGeo
import KindredProto
import KindredServiceKit

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
