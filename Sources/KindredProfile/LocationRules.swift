import KindredGeo
import KindredProto
import KindredServiceKit

/// UpdateLocation's decisions as values (DESIGN.md §5): validate the point, snap it to a precision-7 cell at
/// once, enforce the minimum interval, and refuse a jump faster than an airliner since the last accepted update.
public struct LocationRules: Sendable {
    /// Precision of the stored cell (≈ 153 m × 153 m).
    public static let storedPrecision = 7
    /// Precision of the cell events and the index carry (≈ 1.2 km × 0.6 km).
    public static let sharedPrecision = 6

    /// Least time between two accepted updates; default 60 s (the contract's).
    public var minimumInterval: Duration = .seconds(60)
    /// Fastest plausible travel; default 1000 km/h.
    public var maxSpeedKmPerHour: Double = 1000
    /// Distances up to this are always plausible (cell rounding); default 5 km.
    public var slackKm: Double = 5

    public init() {}

    /// The last accepted location of a profile: its stored cell and when.
    public struct Previous: Sendable, Hashable {
        public var cell: String
        public var unixMilliseconds: Int64
        public init(cell: String, unixMilliseconds: Int64) {
            self.cell = cell
            self.unixMilliseconds = unixMilliseconds
        }
    }

    public enum Decision: Sendable, Hashable {
        /// Store `cell` (precision 7); `sharedCellChanged`: the precision-6 cell differs from the previous one.
        case accept(cell: String, sharedCellChanged: Bool)
        /// Too soon: retry at `retryAtUnixMilliseconds`.
        case tooSoon(retryAtUnixMilliseconds: Int64)
        /// Faster than `maxSpeedKmPerHour` since the previous update.
        case implausibleJump
        /// Not a valid point (NaN, infinite, out of range).
        case invalid(field: String)
    }

    /// The decision for `latitude`/`longitude` at `now` after `previous`.
    public func decide(latitude: Double, longitude: Double, previous: Previous?, nowUnixMilliseconds now: Int64) -> Decision {
        guard latitude.isFinite, (-90...90).contains(latitude) else { return .invalid(field: "location.latitude_deg") }
        guard longitude.isFinite, (-180...180).contains(longitude) else { return .invalid(field: "location.longitude_deg") }
        let cell = Geohash.encode(latitude: latitude, longitude: longitude, precision: Self.storedPrecision)!
        guard let previous else { return .accept(cell: cell, sharedCellChanged: true) }
        let interval = Self.milliseconds(self.minimumInterval)
        if now - previous.unixMilliseconds < interval {
            return .tooSoon(retryAtUnixMilliseconds: previous.unixMilliseconds + interval)
        }
        if let from = Geohash.decode(previous.cell), let to = Geohash.decode(cell) {
            let distance = Geohash.distanceKm(from, to)
            let hours = Double(max(1, now - previous.unixMilliseconds)) / 3_600_000
            if distance > self.slackKm, distance / hours > self.maxSpeedKmPerHour { return .implausibleJump }
        }
        let changed = cell.prefix(Self.sharedPrecision) != previous.cell.prefix(Self.sharedPrecision)
        return .accept(cell: cell, sharedCellChanged: changed)
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
