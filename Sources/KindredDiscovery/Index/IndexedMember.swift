import Foundation
import KindredServiceKit

/// One member as the index needs them, built from a `CandidateSnapshot` (profile events) by the service.
public struct IndexedMember: Sendable, Equatable {
    public var user: UserKey
    /// The member's published precision-6 cell centre: their cell moved by their secret offset (`LocationOffset`,
    /// DESIGN §5); the index never sees more.
    public var latitude: Double
    public var longitude: Double
    /// Gender code (0 = unspecified, or the community does not match on gender), below 8.
    public var gender: UInt8
    /// Bit g set = wants to see gender g; 0 = everyone.
    public var interestedIn: UInt8
    /// Birth date as yyyymmdd, so whole years of age are `(today − birth) / 10000` exactly.
    public var birthDate: Int32
    public var ageMin: UInt8
    public var ageMax: UInt8
    public var radiusKm: UInt16
    public var hideDistance: Bool
    public var interests: InterestSet
    /// Ranking and filterable attribute values folded into bits per "key=value" (see `attributeBit`).
    public var attributes: InterestSet
    /// Last activity and joining time, minutes since 1970 (freshness tie-breakers).
    public var lastActiveMinutes: Int32
    public var joinedMinutes: Int32

    public init(
        user: UserKey, latitude: Double, longitude: Double, gender: UInt8, interestedIn: UInt8, birthDate: Int32,
        ageMin: UInt8, ageMax: UInt8, radiusKm: UInt16, hideDistance: Bool, interests: InterestSet,
        attributes: InterestSet, lastActiveMinutes: Int32, joinedMinutes: Int32
    ) {
        self.user = user
        self.latitude = latitude
        self.longitude = longitude
        self.gender = gender
        self.interestedIn = interestedIn
        self.birthDate = birthDate
        self.ageMin = ageMin
        self.ageMax = ageMax
        self.radiusKm = radiusKm
        self.hideDistance = hideDistance
        self.interests = interests
        self.attributes = attributes
        self.lastActiveMinutes = lastActiveMinutes
        self.joinedMinutes = joinedMinutes
    }

    /// The bit of an attribute value ("business_field=fintech"), as stored in `attributes` and used by filters.
    public static func attributeBit(key: String, value: String) -> InterestSet {
        InterestSet(words: ["\(key)=\(value)"])
    }
}
