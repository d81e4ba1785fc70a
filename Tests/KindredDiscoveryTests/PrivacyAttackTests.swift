import Foundation
import KindredDiscovery
import KindredGRPC
import KindredGeo
import KindredProto
import KindredServiceKit
import Testing

/// DESIGN §5 and issue 12 as an attack on a real discovery server: an attacker places 25 fake accounts on a
/// grid around a group of victims (spoofed positions, as a script could within the location rate limits),
/// reads every victim's shown distance from each fake, probes radii with SearchMembers' max_distance_km
/// (1, 2, 3… km, from the middle nine) and reads the result order, then searches every precision-6 cell of the area for those
/// consistent with all answers and takes their centre as the victim's position.
///
/// The attacker is given more than a real one has: where its own fakes are published (the server's offset
/// key, which a real attacker does not know). With plain cell centres (the offset off) the attack recovers
/// each victim's cell: error below 0.7 km. With the published positions' fixed secret offset
/// (`LocationOffset`) it recovers the published cell, which is at least 1 km from every victim.
/// Fixed victim positions (the plain-cell attack's bound depends on where in their cells they are).
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

@Suite("Privacy: trilateration attack", .serialized)
struct PrivacyAttackTests {
    static let centre = (latitude: 52.5201, longitude: 13.4049)
    static let kmPerDegreeLatitude = 6371.0088 * Double.pi / 180
    static var kmPerDegreeLongitude: Double { kmPerDegreeLatitude * cos(centre.latitude * .pi / 180) }

    struct Outcome {
        var errors: [Double]
        var consistentCells: [Int]
    }

    /// Runs the whole attack against a server with (`offset`) or without the published positions' offset.
    static func attack(offset: Bool) async throws -> Outcome {
        let settings = offset ? [:] : ["KINDRED_TEST_PLAIN_CELLS": "1"]
        return try await DiscoveryHarness.with(settings: settings) { harness in
            try await harness.community(maxRadiusKm: 160)
            // 16 victims at fixed true positions within ±3 km of the centre, anywhere inside their cells.
            var random = SplitMix(state: 2026)
            var victims: [Member] = []
            for _ in 0..<16 {
                var victim = Member(gender: .woman, interestedIn: [], radiusKm: 160)
                victim.latitude = centre.latitude + Double.random(in: -3...3, using: &random) / kmPerDegreeLatitude
                victim.longitude = centre.longitude + Double.random(in: -3...3, using: &random) / kmPerDegreeLongitude
                victims.append(victim)
            }
            // 25 fake viewers on a 5 × 5 grid, 1.7 km apart, over the same area.
            var probes: [Member] = []
            for row in -2...2 {
                for column in -2...2 {
                    var fake = Member(gender: .man, interestedIn: [], radiusKm: 160)
                    fake.latitude = centre.latitude + Double(row) * 1.7 / kmPerDegreeLatitude + 0.0013
                    fake.longitude = centre.longitude + Double(column) * 1.7 / kmPerDegreeLongitude + 0.0021
                    probes.append(fake)
                }
            }
            try await harness.publish(victims + probes)

            // Each fake's view: the shown distance of every victim, the smallest radius that finds them, their
            // rank in the nearest-first list.
            var shown = [[Int]](repeating: [], count: victims.count)
            var smallest = [[Int]](repeating: [], count: victims.count)
            var ranks = [[Int]](repeating: [], count: victims.count)
            for (p, probe) in probes.enumerated() {
                let list = try await harness.search(probe) { $0.maxDistanceKm = 25 }
                var found: [String: Int] = [:]
                // Radius probing from the middle 3 × 3 fakes (it says what the shown distance says: checked below).
                let probing = [6, 7, 8, 11, 12, 13, 16, 17, 18].contains(p)
                for radius in probing ? Array(1...12) : [] {
                    for member in try await harness.search(probe, { $0.maxDistanceKm = Int32(radius) }) where found[member.userId] == nil {
                        found[member.userId] = radius
                    }
                }
                for (v, victim) in victims.enumerated() {
                    let distance = Int(list.first { $0.userId == victim.id }?.distanceKm ?? -1)
                    shown[v].append(distance)
                    smallest[v].append(probing ? found[victim.id] ?? 13 : distance)
                    ranks[v].append(list.firstIndex { $0.userId == victim.id } ?? -1)
                }
            }
            // What a fake knows of its own position: its published centre (more than a real attacker knows).
            let location = LocationOffset(key: Array(testLocationKey.utf8))
            let probePositions = probes.map { probe in
                let cell = Geohash.decode(Geohash.encode(latitude: probe.latitude, longitude: probe.longitude, precision: 6)!)!
                return offset ? location.published(user: probe.key, latitude: cell.latitude, longitude: cell.longitude) : cell
            }
            // Every precision-6 cell within ±10 km: consistent when it gives every answer seen.
            var cells = Set<String>()
            for i in -40...40 {
                for j in -40...40 {
                    cells.insert(Geohash.encode(
                        latitude: centre.latitude + Double(i) * 0.25 / kmPerDegreeLatitude,
                        longitude: centre.longitude + Double(j) * 0.25 / kmPerDegreeLongitude, precision: 6)!)
                }
            }
            let centres = cells.map { Geohash.decode($0)! }
            var outcome = Outcome(errors: [], consistentCells: [])
            for (v, victim) in victims.enumerated() {
                // Shown distances, radius probing and order agree: what the attack uses is the shown distance.
                #expect(shown[v].allSatisfy { $0 >= 1 }, "every fake sees victim \(v)")
                #expect(zip(shown[v], smallest[v]).allSatisfy { $0 == $1 || ($0 > 12 && $1 == 13) }, "radius probing finds victim \(v) at the shown distance")
                #expect(ranks[v].allSatisfy { $0 >= 0 })
                let consistent = centres.filter { cell in
                    probePositions.indices.allSatisfy { k in
                        max(1, Int(Geohash.distanceKm(probePositions[k], cell).rounded())) == shown[v][k]
                    }
                }
                outcome.consistentCells.append(consistent.count)
                guard !consistent.isEmpty else {
                    outcome.errors.append(.infinity)
                    continue
                }
                let estimate = (
                    latitude: consistent.map(\.latitude).reduce(0, +) / Double(consistent.count),
                    longitude: consistent.map(\.longitude).reduce(0, +) / Double(consistent.count))
                outcome.errors.append(Geohash.distanceKm(estimate, (victim.latitude, victim.longitude)))
            }
            return outcome
        }
    }

    @Test("With plain cell centres the attack pins every victim's cell (error < 0.7 km): the attack works")
    func plainCellsLeak() async throws {
        let outcome = try await Self.attack(offset: false)
        print("privacy attack, plain cells: errors \(outcome.errors.map { String(format: "%.2f", $0) }) km, consistent cells \(outcome.consistentCells)")
        #expect(outcome.errors.allSatisfy { $0 < 0.7 }, "\(outcome.errors)")
    }

    @Test("With the secret offset the same attack is at least 1 km off for every victim")
    func offsetHoldsAttackerAtOneKilometre() async throws {
        let outcome = try await Self.attack(offset: true)
        print("privacy attack, published offset: errors \(outcome.errors.map { String(format: "%.2f", $0) }) km, consistent cells \(outcome.consistentCells)")
        #expect(outcome.errors.allSatisfy { $0 >= 1 }, "\(outcome.errors)")
    }

    @Test("The offset is fixed per user and key, 2.4–3.0 km long, and its published centre ≥ 1 km from the cell")
    func offsetIsStableAndBounded() throws {
        let location = LocationOffset(key: Array(testLocationKey.utf8))
        let other = LocationOffset(key: Array("another-deployment-key-0123456789abcdef".utf8))
        var bearings: [Double] = []
        for n in 0..<2000 {
            let user = UserKey(high: 0x0190_0000_0000_7000 | UInt64(n) << 16, low: 0x8000_0000_0000_0000 | UInt64(n) &* 0x9e37_79b9)
            let (bearing, length) = location.displacement(of: user)
            #expect(LocationOffset.kilometres.contains(length))
            let again = location.displacement(of: user), elsewhere = other.displacement(of: user)
            #expect(again.bearing == bearing && again.kilometres == length)
            #expect(elsewhere.bearing != bearing || elsewhere.kilometres != length)
            bearings.append(bearing)
            // Anywhere in a cell (here its corner), at several latitudes: the published centre ≥ 1 km away.
            for latitude in [0.3, 35.0, 52.52, 69.0] {
                let cell = Geohash.encode(latitude: latitude, longitude: 13.4 + Double(n) * 0.001, precision: 6)!
                let bounds = Geohash.bounds(cell)!
                let centre = Geohash.decode(cell)!
                let published = location.published(user: user, latitude: centre.latitude, longitude: centre.longitude)
                for corner in [(bounds.latitude.lowerBound, bounds.longitude.lowerBound), (bounds.latitude.upperBound, bounds.longitude.upperBound),
                               (bounds.latitude.lowerBound, bounds.longitude.upperBound), (bounds.latitude.upperBound, bounds.longitude.lowerBound)] {
                    #expect(Geohash.distanceKm(published, corner) >= 1)
                }
            }
        }
        // Directions spread over the circle (each quadrant holds about a quarter).
        for quadrant in 0..<4 {
            let share = Double(bearings.filter { Int($0 / (.pi / 2)) == quadrant }.count) / Double(bearings.count)
            #expect(share > 0.2 && share < 0.3)
        }
    }
}
