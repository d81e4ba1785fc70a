import Foundation

/// Coarse geography for the index: positions are geohash cell centres (never raw coordinates, DESIGN §5),
/// candidates are bucketed by the geohash cell of precision 5 (~4.9 km × 4.9 km at the equator) that holds
/// their centre, and a radius query visits the precision-5 cells covering the circle in rings, nearest first.
///
/// A precision-5 geohash cell is a cell of a 8192 × 4096 longitude/latitude grid (13 + 12 bits), so the index
/// keys a cell by its grid row and column (`row << 13 | column`) instead of interleaving the bits: the same
/// cells, and neighbours are found with integer arithmetic.
public enum GeoCell {
    static let columns = 8192
    static let rows = 4096
    static let latitudeSpan = 180.0 / Double(rows)
    static let longitudeSpan = 360.0 / Double(columns)

    /// The bucket key of the precision-5 cell holding a position.
    public static func bucketKey(latitude: Double, longitude: Double) -> UInt32 {
        key(row: row(latitude), column: column(longitude))
    }

    static func row(_ latitude: Double) -> Int { min(rows - 1, max(0, Int((latitude + 90) / latitudeSpan))) }

    static func column(_ longitude: Double) -> Int {
        let column = Int(((longitude + 180) / longitudeSpan).rounded(.down))
        return ((column % columns) + columns) % columns
    }

    static func key(row: Int, column: Int) -> UInt32 { UInt32(row << 13 | column) }

    /// Great-circle distance in km between two points: the cell cover's geometry (what members see is
    /// `PublishedLocation.kilometres`).
    public static func kilometres(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
        let toRadians = Double.pi / 180
        let dLat = (lat2 - lat1) * toRadians
        let dLon = (lon2 - lon1) * toRadians
        let h = sin(dLat / 2) * sin(dLat / 2)
            + cos(lat1 * toRadians) * cos(lat2 * toRadians) * sin(dLon / 2) * sin(dLon / 2)
        return 2 * 6371.0088 * asin(min(1, h.squareRoot()))
    }

    /// Calls `body` with the key of every precision-5 cell that intersects the circle of `radiusKm` around
    /// the position, in rings of cells around the position's own cell (so roughly nearest first), until
    /// `body` returns false. Cells whose nearest point is farther than the radius are skipped.
    public static func forEachCell(
        latitude: Double,
        longitude: Double,
        radiusKm: Double,
        _ body: (UInt32) -> Bool
    ) {
        let centreRow = row(latitude)
        let centreColumn = column(longitude)
        let cosLatitude = max(0.01, cos(latitude * .pi / 180))
        let rowReach = Int((radiusKm / (111.2 * latitudeSpan)).rounded(.up))
        let columnReach = min(columns / 2, Int((radiusKm / (111.2 * longitudeSpan * cosLatitude)).rounded(.up)))
        let reach = max(rowReach, columnReach)
        func visit(_ r: Int, _ c: Int) -> Bool {
            guard r >= 0, r < rows, abs(r - centreRow) <= rowReach, abs(c - centreColumn) <= columnReach else {
                return true
            }
            // The cell's nearest point to the position; skip the cell when it is beyond the radius.
            let south = Double(r) * latitudeSpan - 90
            let west = Double(c) * longitudeSpan - 180
            let nearestLatitude = min(max(latitude, south), south + latitudeSpan)
            let nearestLongitude = min(max(longitude, west), west + longitudeSpan)
            if r != centreRow || c != centreColumn,
                kilometres(latitude, longitude, nearestLatitude, nearestLongitude) > radiusKm
            {
                return true
            }
            return body(key(row: r, column: ((c % columns) + columns) % columns))
        }
        guard visit(centreRow, centreColumn) else { return }
        if reach == 0 { return }
        for ring in 1...reach {
            // Top and bottom rows of the ring, then the left and right columns between them.
            for c in (centreColumn - ring)...(centreColumn + ring) {
                guard visit(centreRow - ring, c), visit(centreRow + ring, c) else { return }
            }
            for r in (centreRow - ring + 1)...(centreRow + ring - 1) {
                guard visit(r, centreColumn - ring), visit(r, centreColumn + ring) else { return }
            }
        }
    }
}
