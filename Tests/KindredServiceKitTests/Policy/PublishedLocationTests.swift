import Foundation
import KindredGRPCServices
import KindredGeo
import KindredServiceKit
import Testing

@Suite struct PublishedLocationTests {
    static let key = "published-location-test-key-0123456789abcdef"
    static let location = PublishedLocation(offset: LocationOffset(key: Array(key.utf8)))
    /// Degrees of latitude per km along a meridian.
    static let degreesPerKm = 180 / (Geohash.earthRadiusKm * .pi)

    /// Whole km, floor 1: points `km` apart along a meridian (and a few far pairs) show as `shown`.
    @Test(arguments: [
        (0.0, 1), (0.3, 1), (1.4, 1), (1.6, 2), (2.49, 2), (2.51, 3), (10.0, 10), (99.7, 100), (20015.0, 20015),
    ])
    func wholeKilometresWithAFloorOfOne(km: Double, shown: Int) {
        let a = PublishedPoint(latitude: -60, longitude: 10)
        let b = PublishedPoint(latitude: -60 + km * Self.degreesPerKm, longitude: 10)
        #expect(PublishedLocation.kilometres(a, b) == shown)
        #expect(PublishedLocation.kilometres(b, a) == shown)
    }

    @Test func parisToLondon() {
        let paris = PublishedPoint(latitude: 48.8566, longitude: 2.3522)
        let london = PublishedPoint(latitude: 51.5074, longitude: -0.1278)
        #expect((340...348).contains(PublishedLocation.kilometres(paris, london)))
    }

    @Test func acrossTheAntimeridian() {
        let west = PublishedPoint(latitude: 0, longitude: 179.99)
        let east = PublishedPoint(latitude: 0, longitude: -179.99)
        #expect(PublishedLocation.kilometres(west, east) == 2)
    }

    /// The distance every RPC shows is between the two published positions: the same number both ways, only the
    /// first 6 characters of a cell count, and no position without a valid id and cell.
    @Test func betweenPublishedPositions() throws {
        let location = Self.location
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let (a, b) = (UUID().uuidString.lowercased(), UUID().uuidString.lowercased())
            let cellA = try #require(
                Geohash.encode(
                    latitude: .random(in: -60...60, using: &generator),
                    longitude: .random(in: -180..<180, using: &generator),
                    precision: 7
                )
            )
            let cellB = try #require(
                Geohash.encode(
                    latitude: .random(in: -60...60, using: &generator),
                    longitude: .random(in: -180..<180, using: &generator),
                    precision: 7
                )
            )
            let shown = try #require(
                location.kilometres(viewerID: a, viewerCell: cellA, memberID: b, memberCell: cellB)
            )
            #expect(location.kilometres(viewerID: b, viewerCell: cellB, memberID: a, memberCell: cellA) == shown)
            #expect(
                location.kilometres(viewerID: a, viewerCell: String(cellA.prefix(6)), memberID: b, memberCell: cellB)
                    == shown
            )
            // Not between the cells: the published position of a member is their cell moved by their offset.
            let centre = try #require(Geohash.decode(String(cellA.prefix(6))))
            let published = try #require(location.point(userID: a, cell: cellA))
            #expect(published != PublishedPoint(latitude: centre.latitude, longitude: centre.longitude))
        }
        let id = UUID().uuidString
        #expect(location.point(userID: id, cell: nil) == nil)
        #expect(location.point(userID: id, cell: "u09t") == nil)
        #expect(location.point(userID: id, cell: "u09t!x") == nil)
        #expect(location.point(userID: "not-a-uuid", cell: "u09tvw") == nil)
        #expect(location.point(userID: id.lowercased(), cell: "u09tvw") == location.point(userID: id, cell: "u09tvw"))
    }

    /// An attacker standing on the victim's exact spot (any point of their cell, at the cell's published position
    /// of their own) is never shown less than 1 km, and the victim's published position is at least 1 km from
    /// every point of the victim's cell.
    @Test func standingOnTheVictimsCell() throws {
        let location = Self.location
        for _ in 0..<300 {
            let victim = UUID().uuidString
            let cell = try #require(
                Geohash.encode(latitude: .random(in: -60...60), longitude: .random(in: -180..<180), precision: 6)
            )
            let bounds = try #require(Geohash.bounds(cell))
            let published = try #require(location.point(userID: victim, cell: cell))
            let (latitude, longitude) = (asin(published.sinLatitude) * 180 / .pi, published.longitude)
            for corner in [
                (bounds.latitude.lowerBound, bounds.longitude.lowerBound),
                (bounds.latitude.lowerBound, bounds.longitude.upperBound),
                (bounds.latitude.upperBound, bounds.longitude.lowerBound),
                (bounds.latitude.upperBound, bounds.longitude.upperBound),
            ] {
                #expect(Geohash.distanceKm((latitude, longitude), corner) >= 1)
            }
            let attacker = UUID().uuidString
            #expect(
                (location.kilometres(viewerID: attacker, viewerCell: cell, memberID: victim, memberCell: cell) ?? 0)
                    >= 1
            )
        }
    }

    /// One deployment key, read the same way by every service that shows distances.
    @Test func theKeyIsRequired() throws {
        #expect(throws: ConfigurationError.self) { try PublishedLocation(EnvironmentReader([:])) }
        #expect(throws: ConfigurationError.self) {
            try PublishedLocation(EnvironmentReader(["KINDRED_LOCATION_KEY": "too-short"]))
        }
        let configured = try PublishedLocation(EnvironmentReader(["KINDRED_LOCATION_KEY": Self.key]))
        let id = UUID().uuidString
        #expect(configured.point(userID: id, cell: "u09tvw") == Self.location.point(userID: id, cell: "u09tvw"))
        #expect(
            PublishedLocation(offset: nil).point(userID: id, cell: "u09tvw")
                != Self.location.point(userID: id, cell: "u09tvw")
        )
    }
}
