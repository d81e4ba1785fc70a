import Foundation
import KindredDiscovery
import KindredGRPC
import KindredProto
import KindredServiceKit
import Testing

/// DESIGN §5 as an attack: an attacker places many fake accounts around a victim (spoofed positions, as a
/// script could within the location rate limits), reads the victim's distance from each, probes radii with
/// SearchMembers' max_distance_km and compares result order, then estimates the victim's position as the centre
/// of every point consistent with all answers. Whatever the attacker does, the answers are a function of the
/// victim's precision-6 cell only: two victims anywhere in the same cell get identical answers, so the estimate
/// cannot be finer than the cell.
@Suite("Privacy: trilateration attack", .serialized)
struct PrivacyAttackTests {
    /// The true positions of two victims in ONE precision-6 cell: a corner and the middle.
    static let cell = Geohash.encode(latitude: 52.5201, longitude: 13.4049, precision: 6)!

    @Test("Spoofed viewers, radius probing and result order learn nothing finer than the victim's cell")
    func trilateration() async throws {
        let bounds = Geohash.bounds(Self.cell)!
        let corner = (bounds.latitude.lowerBound + 0.0001, bounds.longitude.lowerBound + 0.0001)
        let middle = Geohash.decode(Self.cell)!
        try await DiscoveryHarness.with { harness in
            try await harness.community(maxRadiusKm: 160)
            var cornerVictim = Member(gender: .woman, interestedIn: [], radiusKm: 160)
            (cornerVictim.latitude, cornerVictim.longitude) = corner
            var middleVictim = Member(gender: .woman, interestedIn: [], radiusKm: 160)
            (middleVictim.latitude, middleVictim.longitude) = (middle.latitude, middle.longitude)
            // 49 fake viewers on a 7 × 7 grid, 1.3 km apart, around the victims (the attacker knows the area).
            var probes: [Member] = []
            for row in -3...3 {
                for column in -3...3 {
                    var fake = Member(gender: .man, interestedIn: [], radiusKm: 160)
                    fake.latitude = middle.latitude + Double(row) * 1.3 / 111.2 + 0.0013
                    fake.longitude = middle.longitude + Double(column) * 1.3 / (111.32 * cos(middle.latitude * .pi / 180)) + 0.0021
                    probes.append(fake)
                }
            }
            try await harness.publish([cornerVictim, middleVictim] + probes)

            // What each fake viewer learns about a victim: the shown distance, the smallest radius that still
            // finds them (probing 1, 2, 3... km) and their rank in the nearest-first list.
            func observe(_ victim: Member) async throws -> [[Int]] {
                var observations: [[Int]] = []
                for probe in probes {
                    let list = try await harness.search(probe) { $0.maxDistanceKm = 20 }
                    let shown = Int(list.first { $0.userId == victim.id }?.distanceKm ?? -1)
                    var smallest = -1
                    for radius in max(1, shown - 1)...(shown + 1) {
                        let found = try await harness.search(probe) { $0.maxDistanceKm = Int32(radius) }
                        if found.contains(where: { $0.userId == victim.id }) {
                            smallest = radius
                            break
                        }
                    }
                    // Order: how many members are listed strictly before the victim (ties are ordered by user id,
                    // which says nothing about position).
                    let rank = list.filter { $0.distanceKm < shown }.count
                    observations.append([shown, smallest, rank])
                }
                return observations
            }
            let seenCorner = try await observe(cornerVictim)
            let seenMiddle = try await observe(middleVictim)
            // The answers are identical for both positions: nothing distinguishes points inside a cell.
            #expect(seenCorner == seenMiddle)
            #expect(seenCorner.allSatisfy { $0[0] >= 1 && $0[1] == $0[0] }, "\(seenCorner)")

            // The attacker's best estimate: the centre of every point (50 m grid, ±8 km) whose cell would give
            // the same shown distances from every probe.
            let probeCells = probes.map { Geohash.decode(Geohash.encode(latitude: $0.latitude, longitude: $0.longitude, precision: 6)!)! }
            var (sumLatitude, sumLongitude, consistent) = (0.0, 0.0, 0)
            let step = 0.05
            for i in -160...160 {
                for j in -160...160 {
                    let latitude = middle.latitude + Double(i) * step / 111.2
                    let longitude = middle.longitude + Double(j) * step / (111.32 * cos(middle.latitude * .pi / 180))
                    let centre = Geohash.decode(Geohash.encode(latitude: latitude, longitude: longitude, precision: 6)!)!
                    var fits = true
                    for (k, probe) in probeCells.enumerated() {
                        let km = max(1, Int(Geohash.distanceKm(probe, centre).rounded()))
                        if km != seenCorner[k][0] {
                            fits = false
                            break
                        }
                    }
                    if fits {
                        sumLatitude += latitude
                        sumLongitude += longitude
                        consistent += 1
                    }
                }
            }
            #expect(consistent > 0)
            let estimate = (latitude: sumLatitude / Double(consistent), longitude: sumLongitude / Double(consistent))
            let errorCorner = Geohash.distanceKm(estimate, (corner.0, corner.1))
            let errorMiddle = Geohash.distanceKm(estimate, (middle.latitude, middle.longitude))
            let area = Double(consistent) * step * step
            print("privacy attack: consistent area \(area) km², error corner \(errorCorner) km, middle \(errorMiddle) km")
            // One estimate for both victims, so at least one of them is half the distance between them away.
            let apart = Geohash.distanceKm((corner.0, corner.1), (middle.latitude, middle.longitude))
            #expect(max(errorCorner, errorMiddle) >= apart / 2)
            // The attacker cannot even narrow the victim down to their cell: the consistent region is wider.
            #expect(area >= 0.4)
        }
    }
}
