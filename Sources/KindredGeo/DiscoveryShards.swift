import Foundation

/// How discovery's index is split by place, the one rule the discovery replicas and their callers share: the
/// world is cut into geohash cells of precision 2 (11.25° × 5.625°, about 1,250 × 625 km at the equator), and each
/// cell belongs to one of `count` shards by a stable hash of its text (FNV-1a), so every process computes the same
/// owner with no map to distribute. Replica `index` serves the viewers whose position lies in a cell it owns, and
/// holds every member a deck served from those cells can reach (`holds`): its cells and a rim of the widest
/// radius around them. Cells this large keep that rim small beside the cells; with precision-3 cells (156 km)
/// hashed apart, a 170 km rim reached a cell of every shard from almost everywhere, so every shard held everyone.
public struct DiscoveryShards: Sendable, Equatable, CustomStringConvertible {
    /// This replica's shard, 0..<count.
    public let index: Int
    /// Shards in all (1: one replica owns everything).
    public let count: Int

    /// Characters of the cells that are assigned to shards.
    public static let cellPrecision = 2
    /// A cell's height and width in degrees at `cellPrecision` (5 latitude and 5 longitude bits).
    static let cellHeight = 180.0 / 32
    static let cellWidth = 360.0 / 32

    /// One replica owning every cell.
    public static let single = DiscoveryShards(uncheckedIndex: 0, count: 1)

    private init(uncheckedIndex index: Int, count: Int) {
        self.index = index
        self.count = count
    }

    /// Shard `index` of `count` (1...4096 shards); nil when out of range.
    public init?(index: Int, count: Int) {
        guard (1...4096).contains(count), (0..<count).contains(index) else { return nil }
        self.init(uncheckedIndex: index, count: count)
    }

    /// `<index>/<count>`, as in `KINDRED_DISCOVERY_SHARDS=1/3`; nil when malformed or out of range.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let index = Int(parts[0]), let count = Int(parts[1]) else { return nil }
        self.init(index: index, count: count)
    }

    public var description: String { "\(self.index)/\(self.count)" }

    /// Whether there is more than one shard.
    public var isSharded: Bool { self.count > 1 }

    /// The shard owning a cell of `cellPrecision` characters.
    public static func shard(ofCell cell: String, count: Int) -> Int {
        guard count > 1 else { return 0 }
        var hash: UInt32 = 2_166_136_261
        for byte in cell.utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 16_777_619
        }
        return Int(hash % UInt32(count))
    }

    /// The shard serving a viewer at this (published) position; 0 for an invalid point.
    public func owner(latitude: Double, longitude: Double) -> Int {
        guard self.isSharded,
            let cell = Geohash.encode(latitude: latitude, longitude: longitude, precision: Self.cellPrecision)
        else { return 0 }
        return Self.shard(ofCell: cell, count: self.count)
    }

    /// Whether this replica must hold a member at this (published) position: some cell it owns lies within
    /// `reachKm` of the point (a box around the point that contains the circle, so a little more than needed).
    /// Everyone a deck, search or candidate check served from an owned cell can reach within `reachKm` is held.
    public func holds(latitude: Double, longitude: Double, reachKm: Double) -> Bool {
        guard self.isSharded else { return true }
        guard Geohash.isValid(latitude: latitude, longitude: longitude) else { return self.index == 0 }
        let latitudeReach = reachKm / 110.574
        let south = max(-90, latitude - latitudeReach)
        let north = min(90, latitude + latitudeReach)
        // The widest longitude span is at the latitude nearest a pole within the box.
        let widest = max(abs(south), abs(north))
        let cosine = cos(min(widest, 89.9) * .pi / 180)
        let longitudeReach = min(180, reachKm / (111.320 * cosine))
        var cellLatitude = south
        while true {
            var cellLongitude = longitude - longitudeReach
            while true {
                var wrapped = cellLongitude
                if wrapped < -180 { wrapped += 360 }
                if wrapped > 180 { wrapped -= 360 }
                if let cell = Geohash.encode(latitude: cellLatitude, longitude: wrapped, precision: Self.cellPrecision),
                    Self.shard(ofCell: cell, count: self.count) == self.index
                {
                    return true
                }
                if cellLongitude >= longitude + longitudeReach { break }
                cellLongitude = min(cellLongitude + Self.cellWidth, longitude + longitudeReach)
            }
            if cellLatitude >= north { break }
            cellLatitude = min(cellLatitude + Self.cellHeight, north)
        }
        return false
    }
}
