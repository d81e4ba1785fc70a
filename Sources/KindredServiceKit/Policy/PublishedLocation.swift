import Foundation
import KindredGRPCServices
import KindredGeo

/// A published position as distances read it: the published cell centre's latitude as its sine and cosine and its
/// longitude in degrees (24 bytes, so discovery's index keeps one per member and its scan computes nothing else).
public struct PublishedPoint: Sendable, Equatable {
    public var sinLatitude: Double
    public var cosLatitude: Double
    public var longitude: Double

    @inlinable
    public init(latitude: Double, longitude: Double) {
        self.sinLatitude = sin(latitude * .pi / 180)
        self.cosLatitude = cos(latitude * .pi / 180)
        self.longitude = longitude
    }
}

/// The one place that says how far apart two members are shown (DESIGN §5): every distance any RPC shows of a
/// member — the deck, search, profile cards (GetProfile, matches, likes received, undo) — is
/// ``kilometres(_:_:)`` between the viewer's and the member's published positions (``point(userID:cell:)``: the
/// member's precision-6 cell moved by their secret ``LocationOffset``), whole km, at least 1. Discovery's radius
/// filter and sort order use the same number, so none of them tells an attacker more than the number does.
///
/// Discovery and profile each build one from the same `KINDRED_LOCATION_KEY` (``init(_:)``), so both publish every
/// member at the same place.
public struct PublishedLocation: Sendable {
    /// How positions are published; nil only where a benchmark or test measures plain cell centres.
    public let offset: LocationOffset?

    public init(offset: LocationOffset?) {
        self.offset = offset
    }

    /// `KINDRED_LOCATION_KEY` (string, 32..256), required: the secret each member's published position derives
    /// from; the same value in discovery and profile. Keep it stable: a new key moves every member's published cell.
    public init(_ reader: EnvironmentReader) throws {
        guard let key = try reader.secret("KINDRED_LOCATION_KEY", length: 32...256) else {
            throw ConfigurationError(
                key: "KINDRED_LOCATION_KEY",
                problem: "is required (32..256 characters): members' published positions derive from it"
            )
        }
        self.offset = LocationOffset(key: Array(key.utf8))
    }

    /// The published position of the member with user id bits `high`, `low` whose cell's centre is (`latitude`,
    /// `longitude`).
    public func point(high: UInt64, low: UInt64, latitude: Double, longitude: Double) -> PublishedPoint {
        let centre =
            self.offset?.published(high: high, low: low, latitude: latitude, longitude: longitude)
            ?? (latitude: latitude, longitude: longitude)
        return PublishedPoint(latitude: centre.latitude, longitude: centre.longitude)
    }

    /// The published position of `userID` (a UUID) whose cell (precision 6 or finer; only its first 6 characters
    /// count) is `cell`; nil without a cell or for an invalid id or cell.
    public func point(userID: String, cell: String?) -> PublishedPoint? {
        guard let cell, cell.count >= Self.precision, let uuid = UUID(uuidString: userID),
            let centre = Geohash.decode(String(cell.prefix(Self.precision)))
        else { return nil }
        let b = uuid.uuid
        let high = [b.0, b.1, b.2, b.3, b.4, b.5, b.6, b.7].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let low = [b.8, b.9, b.10, b.11, b.12, b.13, b.14, b.15].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return self.point(high: high, low: low, latitude: centre.latitude, longitude: centre.longitude)
    }

    /// The distance shown between two published positions: great-circle km (spherical law of cosines), rounded to
    /// whole km, at least 1. Symmetric: both members of a pair see the same number.
    @inlinable
    public static func kilometres(_ a: PublishedPoint, _ b: PublishedPoint) -> Int {
        let cosine =
            a.sinLatitude * b.sinLatitude + a.cosLatitude * b.cosLatitude
            * cos(b.longitude * .pi / 180 - a.longitude * .pi / 180)
        return max(1, Int((Geohash.earthRadiusKm * acos(min(1, max(-1, cosine)))).rounded()))
    }

    /// The distance `viewerID` (in `viewerCell`) is shown of `memberID` (in `memberCell`); nil when either has no
    /// position.
    public func kilometres(viewerID: String, viewerCell: String?, memberID: String, memberCell: String?) -> Int? {
        guard let viewer = self.point(userID: viewerID, cell: viewerCell),
            let member = self.point(userID: memberID, cell: memberCell)
        else { return nil }
        return Self.kilometres(viewer, member)
    }

    /// The precision of the cells positions are published from (the finest any service shares: ~1.2 × 0.6 km).
    public static let precision = 6
}
