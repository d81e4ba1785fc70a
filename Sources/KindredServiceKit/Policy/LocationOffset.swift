import Foundation
import KindredGeo
import KindredOpenSSL

/// Where a member is published (DESIGN §5): their precision-6 cell displaced by a fixed secret offset, then
/// snapped to a precision-6 cell centre again. Every distance, radius filter and sort order uses the published
/// centre (``PublishedLocation``), so whatever an attacker asks (spoofed positions, radius probing, result order)
/// answers depend on the published cell only, and the published cell is at least 1 km from where the member is.
///
/// Plain cell centres are not enough: an attacker who probes from enough places recovers the victim's cell,
/// which pins the victim to within 0.68 km (half a precision-6 cell's diagonal). The offset makes that cell
/// the wrong one: its direction and length come from HMAC-SHA-256(server key, user id), so
/// - it is the same on every replica, in every service and after every restart (one key per deployment), and
///   averaging many answers, or answers over time, converges on the published cell, not on the member;
/// - its length is uniform in `kilometres` (2.4…3.0 km): snapping moves the published centre at most half a
///   cell's diagonal (0.68 km at the equator, less elsewhere) from the displaced point, and the member is at
///   most that far from their own cell's centre, so the published centre is at least 2.4 − 2 × 0.68 ≥ 1.04 km
///   from the member's true position;
/// - without the key, the offset cannot be computed or undone.
///
/// The cost: distances shown to members (and the radius filter) are off by up to ~3.7 km, in a direction that
/// differs per member; both sides of a pair are displaced, so a shown "4 km" may be 1 to 11 km in truth.
public struct LocationOffset: Sendable {
    /// The offset's length, uniform in this range.
    public static let kilometres: ClosedRange<Double> = 2.4...3.0
    private let key: [UInt8]

    /// `key`: the deployment's secret (`KINDRED_LOCATION_KEY`), at least 32 bytes.
    public init(key: some Sequence<UInt8>) {
        self.key = Array(key)
    }

    /// The displacement of the member whose user id (a UUID) has these 128 bits: bearing (radians clockwise from
    /// north) and length in km.
    public func displacement(high: UInt64, low: UInt64) -> (bearing: Double, kilometres: Double) {
        var message = Array("kindred.discovery.location-offset.v1".utf8)
        for shift in stride(from: 56, through: 0, by: -8) {
            message.append(UInt8(truncatingIfNeeded: high >> UInt64(shift)))
        }
        for shift in stride(from: 56, through: 0, by: -8) {
            message.append(UInt8(truncatingIfNeeded: low >> UInt64(shift)))
        }
        let code = HMACSHA256.authenticationCode(for: message, key: self.key)
        func unit(_ bytes: ArraySlice<UInt8>) -> Double {
            Double(bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } >> 11) / Double(1 << 53)
        }
        let bearing = unit(code[0..<8]) * 2 * .pi
        let length =
            Self.kilometres.lowerBound + unit(code[8..<16]) * (Self.kilometres.upperBound - Self.kilometres.lowerBound)
        return (bearing, length)
    }

    /// The published precision-6 cell centre of the member (user id bits `high`, `low`) whose own cell's centre
    /// is (`latitude`, `longitude`).
    public func published(high: UInt64, low: UInt64, latitude: Double, longitude: Double)
        -> (latitude: Double, longitude: Double)
    {
        let (bearing, length) = self.displacement(high: high, low: low)
        let kilometresPerDegree = Geohash.earthRadiusKm * .pi / 180
        let movedLatitude = min(89.99, max(-89.99, latitude + length * cos(bearing) / kilometresPerDegree))
        let scale = max(0.01, cos(latitude * .pi / 180))
        var movedLongitude = longitude + length * sin(bearing) / (kilometresPerDegree * scale)
        if movedLongitude >= 180 { movedLongitude -= 360 }
        if movedLongitude < -180 { movedLongitude += 360 }
        guard let cell = Geohash.encode(latitude: movedLatitude, longitude: movedLongitude, precision: 6),
            let centre = Geohash.decode(cell)
        else { return (latitude, longitude) }
        return centre
    }
}
