import Foundation

/// Geohash cells (base32, lower case): encoding a point into a cell, a cell's bounds and centre, and the
/// great-circle distance between points. Pure functions; the profile service snaps locations with it and
/// discovery computes distances between cell centres (DESIGN.md §5).
public enum Geohash {
    static let alphabet = Array("0123456789bcdefghjkmnpqrstuvwxyz")
    static let values: [Character: Int] = Dictionary(
        uniqueKeysWithValues: alphabet.enumerated().map { ($0.element, $0.offset) })

    /// Longest cell text accepted (12 characters ≈ 3.7 cm × 1.9 cm).
    public static let maxPrecision = 12

    /// Whether the point is a finite latitude in -90...90 and longitude in -180...180.
    public static func isValid(latitude: Double, longitude: Double) -> Bool {
        latitude.isFinite && longitude.isFinite && (-90...90).contains(latitude) && (-180...180).contains(longitude)
    }

    /// The cell of `precision` characters (1...12) containing the point; nil for an invalid point.
    public static func encode(latitude: Double, longitude: Double, precision: Int) -> String? {
        guard self.isValid(latitude: latitude, longitude: longitude), (1...self.maxPrecision).contains(precision)
        else { return nil }
        var latitudeRange = (-90.0, 90.0)
        var longitudeRange = (-180.0, 180.0)
        var text = ""
        text.reserveCapacity(precision)
        var bits = 0
        var bitCount = 0
        var even = true  // even bits refine the longitude
        while text.count < precision {
            if even {
                let middle = (longitudeRange.0 + longitudeRange.1) / 2
                if longitude >= middle {
                    bits = bits << 1 | 1
                    longitudeRange.0 = middle
                } else {
                    bits <<= 1
                    longitudeRange.1 = middle
                }
            } else {
                let middle = (latitudeRange.0 + latitudeRange.1) / 2
                if latitude >= middle {
                    bits = bits << 1 | 1
                    latitudeRange.0 = middle
                } else {
                    bits <<= 1
                    latitudeRange.1 = middle
                }
            }
            even.toggle()
            bitCount += 1
            if bitCount == 5 {
                text.append(self.alphabet[bits])
                bits = 0
                bitCount = 0
            }
        }
        return text
    }

    /// A cell's bounds in degrees; nil for text that is not a geohash of 1...12 characters.
    public static func bounds(_ cell: String) -> (latitude: ClosedRange<Double>, longitude: ClosedRange<Double>)? {
        guard (1...self.maxPrecision).contains(cell.count) else { return nil }
        var latitudeRange = (-90.0, 90.0)
        var longitudeRange = (-180.0, 180.0)
        var even = true
        for character in cell {
            guard let value = self.values[character] else { return nil }
            for shift in stride(from: 4, through: 0, by: -1) {
                let bit = (value >> shift) & 1
                if even {
                    let middle = (longitudeRange.0 + longitudeRange.1) / 2
                    if bit == 1 { longitudeRange.0 = middle } else { longitudeRange.1 = middle }
                } else {
                    let middle = (latitudeRange.0 + latitudeRange.1) / 2
                    if bit == 1 { latitudeRange.0 = middle } else { latitudeRange.1 = middle }
                }
                even.toggle()
            }
        }
        return (latitudeRange.0...latitudeRange.1, longitudeRange.0...longitudeRange.1)
    }

    /// A cell's centre; nil for invalid text.
    public static func decode(_ cell: String) -> (latitude: Double, longitude: Double)? {
        guard let bounds = self.bounds(cell) else { return nil }
        return (
            (bounds.latitude.lowerBound + bounds.latitude.upperBound) / 2,
            (bounds.longitude.lowerBound + bounds.longitude.upperBound) / 2
        )
    }

    /// Mean Earth radius used for distances, kilometres.
    public static let earthRadiusKm = 6371.0088

    /// Great-circle (haversine) distance between two points, kilometres.
    public static func distanceKm(
        _ a: (latitude: Double, longitude: Double),
        _ b: (latitude: Double, longitude: Double)
    ) -> Double {
        let radians = Double.pi / 180
        let dLatitude = (b.latitude - a.latitude) * radians
        let dLongitude = (b.longitude - a.longitude) * radians
        let h =
            sin(dLatitude / 2) * sin(dLatitude / 2) + cos(a.latitude * radians) * cos(b.latitude * radians)
            * sin(dLongitude / 2) * sin(dLongitude / 2)
        return 2 * self.earthRadiusKm * asin(min(1, sqrt(h)))
    }
}
